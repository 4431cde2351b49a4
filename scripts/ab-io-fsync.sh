#!/usr/bin/env bash
# A/B of IOR easy with and without fsync: two loom builds, interleaved
# round by round, each on a fresh `loom up --mdts 2 --osts 4`, ext4
# beside each in the same compare:
#   -t 1m -b 256m -p 2 -F -w -e     (the write phase with its fsync)
#   -t 1m -b 256m -p 2 -F -w -r -C  (writes and reads, no fsync)
#   ./scripts/ab-io-fsync.sh OLD_LOOM NEW_LOOM [ROUNDS] [OUT]   (as root)
set -euo pipefail
source "$(dirname "$0")/ab-lib.sh"
ab_init ab-io-fsync.sh 3 "$1" "$2" "${3:-3}"
out=${4:-/var/tmp/loom-ab-io-fsync}
state=/var/tmp/loom-ab-io-fsync-state mnt=/mnt/loom-ab-io-fsync ext4=/var/tmp/loom-ab-io-fsync-ext4
rm -rf "$out"; mkdir -p "$out" "$ext4" "$mnt"
for r in $(seq 1 "$rounds"); do
    order="old new"; [ $((r % 2)) -eq 0 ] && order="new old"
    for b in $order; do
        ab_fresh_cluster "${bin[$b]}" "$state" "$mnt" "$out/up.log"
        mkdir -p "$mnt/io"
        ab_run "$out" "${bin[$b]}" "e-$b-$r" -- io -t 1m -b 256m -p 2 -F -w -e ext4="$ext4" loomfs="$mnt/io"
        ab_run "$out" "${bin[$b]}" "w-$b-$r" -- io -t 1m -b 256m -p 2 -F -w -r -C ext4="$ext4" loomfs="$mnt/io"
        echo "round $r $b: -e $(grep '^write ' "$out/e-$b-$r.txt" | tr -s ' ' | cut -d' ' -f3,5)" \
            "| -w -r: $(grep -E '^(write|read) ' "$out/w-$b-$r.txt" | tr -s ' ' | cut -d' ' -f3,5 | tr '\n' ' ')"
    done
done
