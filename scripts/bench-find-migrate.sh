#!/usr/bin/env bash
# `loom find` and file data migration (issue #31), on one fresh `loom up
# --mdts 2 --osts 4` on this machine:
#
#   ./scripts/bench-find-migrate.sh LOOM [ROUNDS] [FILES]   (as root; 3, 100000)
#
# 1. A tree of FILES empty and small files in 100 directories dealt over
#    both MDTs, and the same tree on a tmpfs. Then, interleaved round by
#    round, with two sets of tests (names and kinds only; sizes and times,
#    which need every inode):
#    - `loom find` on the mount;
#    - GNU `find` through the mount with the kernel's caches dropped
#      first (cold), and again at once (warm: names and attributes the
#      mount holds under leases);
#    - GNU `find` on the tmpfs copy (the local ceiling).
#    Every run's count of matches must agree.
# 2. 1 GiB in four 256 MiB files moved between two pools of two OSTs
#    each, round by round: `loom migrate -p` (MiB/s), and `cp` of the
#    same files into a directory striped on the other pool (through the
#    mount, the user's way to the same end).
# Prints one line per figure; medians at the end. Builds nothing.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: bench-find-migrate.sh LOOM [ROUNDS] [FILES]" >&2; exit 2; }
loom=$(realpath "$1")
rounds=${2:-3}
files=${3:-100000}
base=/var/tmp/loom-bench-fm out=/var/tmp/loom-bench-fm-out mnt=/mnt/loom-fm tmp=/mnt/loom-fm-tmpfs
rm -rf "$out"; mkdir -p "$out" "$mnt" "$tmp"
down() {
    "$loom" down --dir "$base" >/dev/null 2>&1 || true
    umount "$tmp" 2>/dev/null || true
}
trap down EXIT
rm -rf "$base"
"$loom" up --mdts 2 --osts 4 --dir "$base" --mount "$mnt" >"$out/up.log" 2>&1 &
for _ in $(seq 1 300); do grep -q "^mounted at" "$out/up.log" && break; sleep 0.1; done
grep -q "^mounted at" "$out/up.log" || { cat "$out/up.log"; exit 1; }
mount -t tmpfs -o size=4g tmpfs "$tmp"
now() { date +%s.%N; }
fig() { echo "$1 $2" | tee -a "$out/figures"; }

# 1. The tree.
mkdir "$mnt/t" "$tmp/t"
for i in $(seq 0 99); do "$loom" mkdir -i $((i % 2)) "$mnt/t/d$i"; mkdir "$tmp/t/d$i"; done
make_tree() { # TOP
    python3 - "$1" "$files" <<'EOF'
import os, sys
top, n = sys.argv[1], int(sys.argv[2])
for k in range(n):
    p = os.path.join(top, "d%d" % (k % 100), "f%07d%s" % (k, ".dat" if k % 3 == 0 else ".txt"))
    fd = os.open(p, os.O_WRONLY | os.O_CREAT, 0o644)
    if k % 4 == 0:
        os.write(fd, b"x" * (k % 5000))
    os.close(fd)
EOF
}
t0=$(now); make_tree "$mnt/t"; t1=$(now)
fig make_tree_loomfs_s "$(echo "$t1 - $t0" | bc)"
make_tree "$tmp/t"
run() { # LABEL COMMAND...
    local label=$1; shift
    local t0 t1 n
    t0=$(now); n=$("$@" | wc -l); t1=$(now)
    fig "$label" "$(echo "$t1 - $t0" | bc)"
    echo "$label $n" >>"$out/matches"
}
for r in $(seq 1 "$rounds"); do
    for set in names stats; do
        case $set in
            names) tests=(-name '*7.dat' -type f) ;;
            *) tests=(-size +2k -mtime -1) ;;
        esac
        run "loom_find_${set}_s" "$loom" find "$mnt/t" "${tests[@]}"
        sync; echo 3 > /proc/sys/vm/drop_caches
        run "find_mount_cold_${set}_s" find "$mnt/t" "${tests[@]}"
        run "find_mount_warm_${set}_s" find "$mnt/t" "${tests[@]}"
        run "find_tmpfs_${set}_s" find "$tmp/t" "${tests[@]}"
    done
done

# 2. Data migration against cp.
"$loom" pool new "$mnt" a >/dev/null; "$loom" pool add "$mnt" a 0 1 >/dev/null
"$loom" pool new "$mnt" b >/dev/null; "$loom" pool add "$mnt" b 2 3 >/dev/null
mkdir "$mnt/m" "$mnt/cpa" "$mnt/cpb"
"$loom" setstripe -p a -c 2 "$mnt/m"; "$loom" setstripe -p a -c 2 "$mnt/cpa"; "$loom" setstripe -p b -c 2 "$mnt/cpb"
for i in 1 2 3 4; do head -c $((256 << 20)) /dev/urandom > "$mnt/m/f$i"; cp "$mnt/m/f$i" "$mnt/cpa/f$i"; done
pool=b
for r in $(seq 1 "$rounds"); do
    t0=$(now); "$loom" migrate -q -p $pool -c 2 "$mnt/m"; t1=$(now)
    fig migrate_mib_s "$(echo "1024 / ($t1 - $t0)" | bc -l)"
    if [ $pool = b ]; then from=cpa to=cpb; pool=a; else from=cpb to=cpa; pool=b; fi
    sync; echo 3 > /proc/sys/vm/drop_caches
    t0=$(now); cp "$mnt/$from"/f* "$mnt/$to/"; sync; t1=$(now)
    fig cp_mib_s "$(echo "1024 / ($t1 - $t0)" | bc -l)"
    rm -f "$mnt/$from"/f*
done
sha256sum "$mnt"/m/f* "$mnt"/cp*/f* | awk '{print $1}' | sort | uniq -c | awk '$1 != 2 {bad=1} END {exit bad}' \
    || { echo "migrated and copied files differ" >&2; exit 1; }

echo "--- matches per run (each set must agree)"
sed 's/_\(cold\|warm\)//; s/^loom_find_/find_/; s/^find_mount_/find_/; s/^find_tmpfs_/find_/' "$out/matches" | sort | uniq -c
echo "--- medians (seconds; or MiB/s) over $rounds rounds"
awk '{v[$1] = v[$1] " " $2} END {for (k in v) print k, v[k]}' "$out/figures" | sort |
while read -r k rest; do
    vals=$(echo "$rest" | tr ' ' '\n' | grep -E '^[0-9.]+$' | sort -g)
    cnt=$(echo "$vals" | wc -l)
    med=$(echo "$vals" | sed -n "$(( (cnt + 1) / 2 ))p")
    echo "$k median $med (of: $(echo $vals))"
done
