#!/usr/bin/env bash
# Compression on a real data set (issue #11): a tar of /usr/share written
# into loomfs directories set to off, lz4, zstd:1, zstd:3 and zstd:9,
# beside ext4 and tmpfs, interleaved target by target in every round.
#
#   ./scripts/compress-bench.sh LOOM [ROUNDS] [SOURCE_DIR]
#
# LOOM is a release `loom` binary; ROUNDS (3) rounds; SOURCE_DIR (/usr/share)
# is tarred once. Per round and target: the tar is copied in with dd
# (1 MiB writes, fsync at the end: write MiB/s), the page cache dropped,
# read back to /dev/null (read MiB/s) and compared with the source; the
# stored bytes are the allocated blocks of the file's objects on the
# OSTs. One fresh `loom up --mdts 1 --osts 4` on ext4 serves every
# round. Prints one line per round and target, then medians.
set -euo pipefail
cd "$(dirname "$0")/.."
loom=${1:?usage: compress-bench.sh LOOM [ROUNDS] [SOURCE_DIR]}
rounds=${2:-3}
src=${3:-/usr/share}
[ -x "$loom" ] || { echo "compress-bench.sh: $loom is not an executable loom binary" >&2; exit 2; }
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "compress-bench.sh: ROUNDS must be a positive number, not '$rounds'" >&2; exit 2; }
[ -d "$src" ] || { echo "compress-bench.sh: $src is not a directory" >&2; exit 2; }
loom=$(realpath "$loom")

work=/var/tmp/loom-cbench
state=$work/state mnt=/mnt/loom-cbench
ext4=/var/tmp/loom-cbench-ext4 tmpfs=/dev/shm/loom-cbench-tmpfs
cleanup() {
    "$loom" down --dir "$state" >/dev/null 2>&1 || true
    rm -rf "$ext4" "$tmpfs" "$work"
}
trap cleanup EXIT
cleanup
mkdir -p "$work" "$ext4" "$tmpfs"
tarball=$work/data.tar
tar -C "$(dirname "$src")" -cf "$tarball" "$(basename "$src")" 2>/dev/null || true
size=$(stat -c %s "$tarball")
echo "data set: tar of $src, $((size / 1048576)) MiB"

"$loom" up --mdts 1 --osts 4 --dir "$state" --mount "$mnt" >"$work/up.log" 2>&1 &
for _ in $(seq 1 300); do grep -q "^mounted at" "$work/up.log" 2>/dev/null && break; sleep 0.1; done
grep -q "^mounted at" "$work/up.log" || { cat "$work/up.log"; exit 1; }
settings=(off lz4 zstd:1 zstd:3 zstd:9)
for s in "${settings[@]}"; do
    mkdir "$mnt/$s"
    "$loom" setstripe -c -1 --compress "$s" "$mnt/$s"
done

# Bytes a file's objects take on the OSTs' disks (allocated blocks of
# the data files, from getstripe's object table).
stored_bytes() {
    "$loom" getstripe "$1" | awk '/obdidx/{p=1; next} p && NF >= 2 {print $1, $2}' |
        while read -r idx oid; do
            stat -c %b "$state/targets/ost$idx/objects/$(printf %02x $((oid % 256)))/$oid" 2>/dev/null || echo 0
        done | awk '{s += $1 * 512} END {print s + 0}'
}

results=$work/results
: >"$results"
mibs() { awk -v b="$size" -v t="$1" 'BEGIN {printf "%.0f", b / 1048576 / t}'; }
for r in $(seq 1 "$rounds"); do
    for t in ext4 tmpfs "${settings[@]}"; do
        case $t in
            ext4) dir=$ext4 ;;
            tmpfs) dir=$tmpfs ;;
            *) dir=$mnt/$t ;;
        esac
        rm -f "$dir/data.tar"
        sync
        t0=$(date +%s.%N)
        dd if="$tarball" of="$dir/data.tar" bs=1M conv=fsync status=none
        t1=$(date +%s.%N)
        echo 3 >/proc/sys/vm/drop_caches
        t2=$(date +%s.%N)
        dd if="$dir/data.tar" of=/dev/null bs=1M status=none
        t3=$(date +%s.%N)
        cmp -s "$tarball" "$dir/data.tar" || { echo "compress-bench.sh: $t read back differently" >&2; exit 1; }
        stored=-
        case $t in
            ext4|tmpfs) ;;
            *) stored=$(stored_bytes "$dir/data.tar") ;;
        esac
        w=$(awk -v a="$t0" -v b="$t1" 'BEGIN {print b - a}')
        rd=$(awk -v a="$t2" -v b="$t3" 'BEGIN {print b - a}')
        ratio=-
        [ "$stored" != - ] && ratio=$(awk -v l="$size" -v s="$stored" 'BEGIN {printf "%.2f", l / s}')
        printf "round %d %-7s write %5s MiB/s  read %5s MiB/s  stored %12s  ratio %s\n" \
            "$r" "$t" "$(mibs "$w")" "$(mibs "$rd")" "$stored" "$ratio" | tee -a "$results"
        rm -f "$dir/data.tar"
    done
done

echo
echo "medians of $rounds rounds (MiB/s of the $((size / 1048576)) MiB tar; ratio = logical / stored):"
for t in ext4 tmpfs "${settings[@]}"; do
    awk -v t="$t" 'BEGIN {n = 0} $3 == t {w[n] = $5; rd[n] = $8; s[n] = $11; q[n] = $13; n++}
        function med(a, n,   i, j, x) {
            for (i = 0; i < n; i++) for (j = i + 1; j < n; j++) if (a[j] + 0 < a[i] + 0) { x = a[i]; a[i] = a[j]; a[j] = x }
            return a[int((n - 1) / 2)]
        }
        END {printf "%-7s write %5s  read %5s  stored %12s  ratio %s\n", t, med(w, n), med(rd, n), med(s, n), med(q, n)}' "$results"
done
