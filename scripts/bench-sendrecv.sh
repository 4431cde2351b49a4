#!/usr/bin/env bash
# Send/receive and snapshot-under-load costs (issue #30), on two fresh
# `loom up` clusters on this machine (A: 2 MDTs, 4 OSTs; B: 2 MDTs, 2 OSTs):
#
#   ./scripts/bench-sendrecv.sh LOOM [ROUNDS]   (as root; default 3)
#
# 1. `loom snapshot create` while two processes append to files without
#    pause (ROUNDS times).
# 2. A tree of 5,000 small files and 512 MiB in 4 large files, copied
#    from A to B, interleaved round by round:
#    - `loom send | loom receive` of a snapshot (whole);
#    - `tar -C A -cf - . | tar -C B -xpf -` through both mounts (the
#      reference: what a user would do without send/receive);
#    then 1% of the small files and 1 MiB of one large file changed, and
#    `loom send --from | loom receive` of the increment (its time and
#    stream size).
# 3. The 512 MiB of large files alone, sent and received (MiB/s), and
#    the disk's own write speed for as much (dd with fsync into the
#    clusters' state directory), the ceiling of any copy here.
# Prints one line per figure; medians at the end. Builds nothing.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: bench-sendrecv.sh LOOM [ROUNDS]" >&2; exit 2; }
loom=$(realpath "$1")
rounds=${2:-3}
base=/var/tmp/loom-bench-sr out=/var/tmp/loom-bench-sr-out
rm -rf "$out"; mkdir -p "$out"
down() {
    "$loom" down --dir "$base/a" >/dev/null 2>&1 || true
    "$loom" down --dir "$base/b" >/dev/null 2>&1 || true
}
trap down EXIT
up() { # NAME MDTS OSTS
    rm -rf "${base:?}/$1"
    "$loom" up --mdts "$2" --osts "$3" --dir "$base/$1" --mount "/mnt/loom-sr-$1" >"$out/up-$1.log" 2>&1 &
    for _ in $(seq 1 300); do grep -q "^mounted at" "$out/up-$1.log" && break; sleep 0.1; done
    grep -q "^mounted at" "$out/up-$1.log" || { cat "$out/up-$1.log"; exit 1; }
}
now() { date +%s.%N; }
fig() { echo "$1 $2" | tee -a "$out/figures"; }
a=/mnt/loom-sr-a b=/mnt/loom-sr-b

# 1. Snapshot create under busy appenders.
down; up a 2 4
for w in 1 2; do
    python3 -c '
import sys
f = open(sys.argv[1], "ab")
while True:
    f.write(b"x" * 4096)
' "$a/log$w" &
done
writers=$(jobs -p)
sleep 1
for i in $(seq 1 "$rounds"); do
    t0=$(now); "$loom" snapshot create "$a" "busy$i" >/dev/null; t1=$(now)
    fig "snapshot_create_busy_s" "$(echo "$t1 - $t0" | bc)"
done
kill $writers 2>/dev/null || true; wait 2>/dev/null || true

# 2. Whole and incremental transfers, against tar.
populate() {
    mkdir -p "$a/tree"
    for d in $(seq 0 49); do
        mkdir -p "$a/tree/d$d"
        for f in $(seq 0 99); do printf 'file %s %s\n' "$d" "$f" > "$a/tree/d$d/f$f"; done
    done
    for i in 1 2 3 4; do dd if=/dev/urandom of="$a/tree/big$i" bs=1M count=128 status=none; done
    mkdir -p "$a/large"
    for i in 1 2 3 4; do cp "$a/tree/big$i" "$a/large/big$i"; done
}
for round in $(seq 1 "$rounds"); do
    down; up a 2 4; up b 2 2
    populate
    "$loom" snapshot create "$a" s1 >/dev/null
    order="send tar"; [ $((round % 2)) -eq 0 ] && order="tar send"
    for how in $order; do
        sync; echo 3 > /proc/sys/vm/drop_caches
        case $how in
        send)
            mkdir "$b/recv"
            t0=$(now)
            "$loom" send -q "$a/tree" s1 | "$loom" receive -q "$b/recv"
            t1=$(now)
            fig "whole_send_receive_s" "$(echo "$t1 - $t0" | bc)" ;;
        tar)
            mkdir "$b/tar"
            t0=$(now)
            tar -C "$a/tree" -cf - . | tar -C "$b/tar" -xpf -
            t1=$(now)
            fig "whole_tar_s" "$(echo "$t1 - $t0" | bc)" ;;
        esac
    done
    # The large files alone: send and receive's data rate.
    mkdir "$b/large"
    t0=$(now)
    "$loom" send -q "$a/large" s1 | "$loom" receive -q --no-snapshot "$b/large"
    t1=$(now)
    fig "large_send_receive_mib_s" "$(echo "512 / ($t1 - $t0)" | bc -l | cut -c1-7)"
    t0=$(now)
    dd if=/dev/zero of="$base/disk.test" bs=1M count=512 conv=fsync status=none
    t1=$(now); rm -f "$base/disk.test"
    fig "disk_write_mib_s" "$(echo "512 / ($t1 - $t0)" | bc -l | cut -c1-7)"
    for d in $(seq 0 49); do printf 'changed\n' > "$a/tree/d$d/f7"; done
    dd if=/dev/urandom of="$a/tree/big1" bs=1M count=1 seek=64 conv=notrunc status=none
    "$loom" snapshot create "$a" s2 >/dev/null
    t0=$(now)
    "$loom" send -q --from s1 "$a/tree" s2 > "$out/inc.stream"
    "$loom" receive -q "$b/recv" < "$out/inc.stream"
    t1=$(now)
    fig "increment_send_receive_s" "$(echo "$t1 - $t0" | bc)"
    fig "increment_stream_kib" "$(( $(stat -c %s "$out/inc.stream") / 1024 ))"
    diff -r "$a/tree" "$b/recv" >/dev/null && fig "increment_identical" 1 || fig "increment_identical" 0
done

echo "== medians"
for k in $(awk '{print $1}' "$out/figures" | sort -u); do
    vals=$(awk -v k="$k" '$1 == k { print $2 }' "$out/figures" | sort -g)
    n=$(echo "$vals" | wc -l)
    echo "$k $(echo "$vals" | sed -n "$(( (n + 1) / 2 ))p") ($(echo $vals))"
done
