#!/usr/bin/env bash
# Small files made the way tar makes them, through the library, against
# the MDT side of write-back (issue #32):
#
#   ./scripts/bench-small-files.sh LOOM SMALL_FILES [ROUNDS] [FILES]   (as root; 3, 8000)
#
# SMALL_FILES is the release build of crates/client/examples/small_files.rs
# (`cargo build --release -p loom-client --example small_files`). Each
# round runs both modes, in turn (the order alternates from round to
# round), each on a fresh `loom up --mdts 2 --osts 4`:
#   each    per file a create, its bytes (Data-on-MDT), chown, chmod and
#           utimens: five requests one after another
#   batch   per file one MakeAt (final owner, mode, times and bytes) under
#           granted FIDs, 256 to a batch
# For each run: files/s as the program prints it, and the CPU time all
# `loom server` processes spent (from /proc, user + system), per file.
# Prints one line per run and the medians. Builds nothing.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: bench-small-files.sh LOOM SMALL_FILES [ROUNDS] [FILES]" >&2; exit 2; }
loom=$(realpath "$1") prog=$(realpath "$2")
rounds=${3:-3} files=${4:-8000}
base=/var/tmp/loom-bench-sf out=/var/tmp/loom-bench-sf-out mnt=/mnt/loom-sf
rm -rf "$out"; mkdir -p "$out" "$mnt"
down() { "$loom" down --dir "$base" >/dev/null 2>&1 || true; }
trap down EXIT
tck=$(getconf CLK_TCK)
server_ticks() { # user + system ticks of every loom server process
    local sum=0 pid
    for pid in $(pgrep -f "$loom server" || true); do
        # Fields 14 and 15 of /proc/PID/stat, after the command's ")".
        set -- $(sed 's/.*) //' "/proc/$pid/stat")
        sum=$((sum + ${12} + ${13}))
    done
    echo "$sum"
}
run() { # MODE ROUND
    local mode=$1 round=$2
    down; rm -rf "$base"
    "$loom" up --mdts 2 --osts 4 --dir "$base" --mount "$mnt" >"$out/up.log" 2>&1 &
    for _ in $(seq 1 300); do grep -q "^mounted at" "$out/up.log" && break; sleep 0.1; done
    grep -q "^mounted at" "$out/up.log" || { cat "$out/up.log"; exit 1; }
    local mgs
    mgs=127.0.0.1:$(sed -n 's/^mgs *= *//p' "$base/cluster.toml")
    local t0 t1 line
    t0=$(server_ticks)
    line=$("$prog" "$mgs" "$base/client.key" "sf-$mode" "$files" "$mode")
    t1=$(server_ticks)
    local ms
    ms=$(python3 -c "print(f'{($t1 - $t0) / $tck * 1000 / $files:.3f}')")
    echo "$mode round $round: $line server_cpu_ms_per_file=$ms" | tee -a "$out/runs"
}
for r in $(seq 1 "$rounds"); do
    if [ $((r % 2)) -eq 1 ]; then run each "$r"; run batch "$r"; else run batch "$r"; run each "$r"; fi
done
python3 - "$out/runs" <<'PY'
import json, re, statistics, sys
runs = {}
for l in open(sys.argv[1]):
    mode = l.split()[0]
    j = json.loads(re.search(r"\{.*\}", l).group(0))
    cpu = float(l.rsplit("=", 1)[1])
    runs.setdefault(mode, []).append((j["files_per_s"], cpu))
for mode, v in sorted(runs.items()):
    print(f"{mode}: median {statistics.median(x[0] for x in v):.0f} files/s, "
          f"{statistics.median(x[1] for x in v):.3f} ms server CPU per file ({len(v)} runs)")
PY
