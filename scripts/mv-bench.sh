#!/usr/bin/env bash
# A cross-MDT `mv` of a tree (issue #10): a tree of FILES small files
# (100 per directory, 4 KiB each) in a directory on MDT0, moved with
# mv(1) into a directory on MDT1, against copying it there with
# `cp -a` and removing the source (what mv did when loomfs answered
# EXDEV), beside the same mv and copy on ext4 and tmpfs. Interleaved
# target by target in every round. On loomfs also `loom migrate -m 1`
# of the same tree (its inodes, not only its entry, move to MDT1; no
# data copied).
#
#   ./scripts/mv-bench.sh LOOM [ROUNDS] [FILES]
#
# LOOM is a release `loom` binary; ROUNDS (3); FILES (10000). One fresh
# `loom up --mdts 2 --osts 2` on ext4 serves every round. Prints one
# line per round and target (seconds), then medians.
set -euo pipefail
cd "$(dirname "$0")/.."
loom=${1:?usage: mv-bench.sh LOOM [ROUNDS] [FILES]}
rounds=${2:-3}
files=${3:-10000}
[ -x "$loom" ] || { echo "mv-bench.sh: $loom is not an executable loom binary" >&2; exit 2; }
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "mv-bench.sh: ROUNDS must be a positive number, not '$rounds'" >&2; exit 2; }
[[ $files =~ ^[1-9][0-9]*$ ]] || { echo "mv-bench.sh: FILES must be a positive number, not '$files'" >&2; exit 2; }
loom=$(realpath "$loom")

work=/var/tmp/loom-mvbench
state=$work/state mnt=/mnt/loom-mvbench
ext4=/var/tmp/loom-mvbench-ext4 tmpfs=/dev/shm/loom-mvbench-tmpfs
cleanup() {
    "$loom" down --dir "$state" >/dev/null 2>&1 || true
    rm -rf "$ext4" "$tmpfs" "$work"
}
trap cleanup EXIT
cleanup
mkdir -p "$work" "$ext4" "$tmpfs"
"$loom" up --mdts 2 --osts 2 --dir "$state" --mount "$mnt" >"$work/up.log" 2>&1 &
for _ in $(seq 1 300); do grep -q "^mounted at" "$work/up.log" 2>/dev/null && break; sleep 0.1; done
grep -q "^mounted at" "$work/up.log" || { cat "$work/up.log"; exit 1; }
"$loom" mkdir -i 0 "$mnt/on0"
"$loom" mkdir -i 1 "$mnt/on1"
mkdir -p "$ext4/on0" "$ext4/on1" "$tmpfs/on0" "$tmpfs/on1"

# A tree of $files files of 4 KiB, 100 per directory, at $1.
make_tree() {
    python3 - "$1" "$files" <<'EOF'
import os, sys
root, n = sys.argv[1], int(sys.argv[2])
block = os.urandom(4096)
for i in range(n):
    d = os.path.join(root, "d%03d" % (i // 100))
    if i % 100 == 0:
        os.makedirs(d)
    with open(os.path.join(d, "f%03d" % (i % 100)), "wb") as f:
        f.write(block)
EOF
}
secs() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.3f", b - a}'; }

results=$work/results
: >"$results"
for r in $(seq 1 "$rounds"); do
    for t in ext4 tmpfs loomfs; do
        case $t in
            ext4) base=$ext4 ;;
            tmpfs) base=$tmpfs ;;
            loomfs) base=$mnt ;;
        esac
        migrated=""
        if [ "$t" = loomfs ]; then
            make_tree "$base/on0/tree"
            before=$("$loom" df -i "$mnt" | awk '/-MDT0001/ {print $3; exit}')
            t4=$(date +%s.%N)
            "$loom" migrate -q -m 1 "$base/on0/tree"
            t5=$(date +%s.%N)
            after=$("$loom" df -i "$mnt" | awk '/-MDT0001/ {print $3; exit}')
            [ $((after - before)) -ge "$files" ] || { echo "mv-bench.sh: migrate moved $((after - before)) inodes" >&2; exit 1; }
            n=$(find "$base/on0/tree" -type f | wc -l)
            [ "$n" = "$files" ] || { echo "mv-bench.sh: $n files after migrate, not $files" >&2; exit 1; }
            rm -rf "$base/on0/tree"
            migrated=" migrate $(secs "$t4" "$t5")"
        fi
        make_tree "$base/on0/tree"
        sync
        t0=$(date +%s.%N)
        mv "$base/on0/tree" "$base/on1/tree"
        t1=$(date +%s.%N)
        n=$(find "$base/on1/tree" -type f | wc -l)
        [ "$n" = "$files" ] || { echo "mv-bench.sh: $t: $n files after mv, not $files" >&2; exit 1; }
        mv "$base/on1/tree" "$base/on0/tree"
        sync
        t2=$(date +%s.%N)
        cp -a "$base/on0/tree" "$base/on1/tree" && rm -rf "$base/on0/tree"
        t3=$(date +%s.%N)
        n=$(find "$base/on1/tree" -type f | wc -l)
        [ "$n" = "$files" ] || { echo "mv-bench.sh: $t: $n files after the copy, not $files" >&2; exit 1; }
        rm -rf "$base/on1/tree"
        line="round $r $t mv $(secs "$t0" "$t1") copy+rm $(secs "$t2" "$t3")$migrated"
        echo "$line"
        echo "$line" >>"$results"
    done
done
median() { sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
echo "medians of $rounds rounds, seconds ($files files of 4 KiB):"
for t in ext4 tmpfs loomfs; do
    mv_s=$(awk -v t="$t" '$3 == t {print $5}' "$results" | median)
    cp_s=$(awk -v t="$t" '$3 == t {print $7}' "$results" | median)
    mig=$(awk -v t="$t" '$3 == t && $8 == "migrate" {print $9}' "$results" | median)
    echo "$t mv $mv_s copy+rm $cp_s${mig:+ migrate $mig}"
done
