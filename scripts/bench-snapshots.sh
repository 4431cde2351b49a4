#!/usr/bin/env bash
# Snapshots' costs (issue #30), on a fresh `loom up --mdts 2 --osts 4`:
#
#   ./scripts/bench-snapshots.sh LOOM [ROUNDS]   (as root; default 3)
#
# 1. `loom snapshot create` time with 1,000 files and 1 GiB of data, then
#    with 100,000 files (3 snapshots each).
# 2. IOR easy and hard, mdtest creates, and an in-place overwrite of a
#    1 GiB file, with 0 and with 10 snapshots held, interleaved round by
#    round on one cluster per condition and round (the snapshots taken
#    after the 1 GiB file and 1,000 files were written).
# Prints one line per figure; medians at the end. Builds nothing.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: bench-snapshots.sh LOOM [ROUNDS]" >&2; exit 2; }
loom=$(realpath "$1")
rounds=${2:-3}
state=/var/tmp/loom-bench-snap mnt=/mnt/loom-bench-snap out=/var/tmp/loom-bench-snap-out
rm -rf "$out"; mkdir -p "$out"
down() { "$loom" down --dir "$state" >/dev/null 2>&1 || true; }
trap down EXIT
up() {
    down; rm -rf "$state"
    "$loom" up --mdts 2 --osts 4 --dir "$state" --mount "$mnt" >"$out/up.log" 2>&1 &
    for _ in $(seq 1 300); do grep -q "^mounted at" "$out/up.log" && break; sleep 0.1; done
    grep -q "^mounted at" "$out/up.log" || { cat "$out/up.log"; exit 1; }
}
now() { date +%s.%N; }
snap() { # NAME -> seconds
    local t0 t1; t0=$(now)
    "$loom" snapshot create "$mnt" "$1" >/dev/null
    t1=$(now); echo "$t1 - $t0" | bc
}
fig() { echo "$1 $2" | tee -a "$out/figures"; }
mean_of() { # PHASE FILE -> the mean column of loom bench's summary line
    awk -v p="$1" '$1 == p && $2 == ":" { print $5; exit }' "$2"
}

# 1. Create time against file count.
up
"$loom" bench md -F -n 500 -p 2 --keep --name files1k --no-progress "$mnt" >/dev/null
dd if=/dev/urandom of="$mnt/data" bs=1M count=1024 status=none
for i in 1 2 3; do fig "create_1k_files_s" "$(snap a$i)"; done
"$loom" bench md -F -n 49500 -p 2 --keep --name files99k --no-progress "$mnt" >/dev/null
for i in 1 2 3; do fig "create_100k_files_s" "$(snap b$i)"; done

# 2. With 0 and 10 snapshots held.
for round in $(seq 1 "$rounds"); do
    order="0 10"; [ $((round % 2)) -eq 0 ] && order="10 0"
    for held in $order; do
        echo "== round $round: $held snapshots held" >&2
        up
        mkdir -p "$mnt/io"
        "$loom" bench md -F -n 500 -p 2 --keep --name held --no-progress "$mnt" >/dev/null
        dd if=/dev/urandom of="$mnt/big" bs=1M count=1024 status=none
        for i in $(seq 1 "$held"); do "$loom" snapshot create "$mnt" "h$i" >/dev/null; done
        t0=$(now)
        dd if=/dev/zero of="$mnt/big" bs=1M count=1024 conv=notrunc,fsync status=none
        t1=$(now)
        fig "overwrite_1g_mib_s_$held" "$(echo "1024 / ($t1 - $t0)" | bc -l | cut -c1-7)"
        "$loom" bench io -t 1m -b 256m -p 2 -F -w -r -C --no-progress "$mnt/io" >"$out/easy-$held-$round.txt"
        fig "ior_easy_write_$held" "$(mean_of write "$out/easy-$held-$round.txt")"
        "$loom" bench io -t 47008 -b 47008 -s 2000 -p 2 -w -r -C --no-progress "$mnt/io" >"$out/hard-$held-$round.txt"
        fig "ior_hard_write_$held" "$(mean_of write "$out/hard-$held-$round.txt")"
        fig "ior_hard_read_$held" "$(mean_of read "$out/hard-$held-$round.txt")"
        "$loom" bench md -F -u -n 2000 -p 4 --no-progress "$mnt" >"$out/md-$held-$round.txt"
        fig "md_create_$held" "$(awk '/File creation/ { print $6; exit }' "$out/md-$held-$round.txt")"
        "$loom" snapshot list "$mnt" | tail -n +2 | awk '{print $4}' | tr '\n' ' ' >"$out/held-$held-$round.txt"
        down
    done
done
python3 - "$out/figures" <<'PY'
import collections, statistics, sys
v = collections.defaultdict(list)
for line in open(sys.argv[1]):
    k, x = line.split()
    try:
        v[k].append(float(x))
    except ValueError:
        pass
print(f"{'figure':32} {'median':>10}  (min-max, n)")
for k in sorted(v):
    xs = v[k]
    print(f"{k:32} {statistics.median(xs):10.2f}  ({min(xs):.2f}-{max(xs):.2f}, {len(xs)})")
PY
