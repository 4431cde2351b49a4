#!/usr/bin/env bash
# A/B of two loom builds on bandwidth (issue #11: what checksums cost),
# interleaved round by round so the machine's drifts fall on both alike:
#
#   ./scripts/ab-io.sh OLD_LOOM NEW_LOOM [ROUNDS]   (as root; default 3 rounds)
#
# Each round, for each build in turn: a fresh `loom up --mdts 2 --osts 4`,
# then with `loom bench compare io` against ext4 and tmpfs in the same run,
# through the mount and through the client library (whose reads reach the
# OSTs: the mount's come from its page cache):
#   IOR easy: a file per process, -t 1m -b 256m -p 4 -F -w -r -e
#   IOR hard: one shared file, 47008-byte transfers, -t 47008 -b 47008
#             -s 2000 -p 4 -w -r -e
# and, with NEW_LOOM only, `loom scrub` of 2 GiB written over all OSTs:
# unthrottled from the page cache, unthrottled from the disk (caches
# dropped first), and at --rate 100 (MiB/s per OST).
# Results: /var/tmp/loom-ab-io/ (JSON per run), medians printed at the end.
set -euo pipefail
source "$(dirname "$0")/ab-lib.sh"
ab_init ab-io.sh 3 "$@"
state=/var/tmp/loom-ab-io-state mnt=/mnt/loom-ab-io
ext4=/var/tmp/loom-bench-ext4 tmpfs=/dev/shm/loom-bench-tmpfs
out=/var/tmp/loom-ab-io
rm -rf "$out"; mkdir -p "$out" "$ext4" "$tmpfs"
for round in $(seq 1 "$rounds"); do
    for b in old new; do
        loom=${bin[$b]}
        ab_fresh_cluster "$loom" "$state" "$mnt" "$out/up.log"
        mkdir -p "$mnt/b"
        (cd "$out" && "$loom" bench compare io -t 1m -b 256m -p 4 -F -w -r -e --no-progress \
            --json "$out/easy-$b-$round.json" \
            ext4=$ext4 tmpfs=$tmpfs loomfs=$mnt/b lib=loom:$mnt/b >"$out/easy-$b-$round.txt")
        (cd "$out" && "$loom" bench compare io -t 47008 -b 47008 -s 2000 -p 4 -w -r -e --no-progress \
            --json "$out/hard-$b-$round.json" \
            ext4=$ext4 tmpfs=$tmpfs loomfs=$mnt/b lib=loom:$mnt/b >"$out/hard-$b-$round.txt")
        if [ "$b" = new ]; then
            "$loom" setstripe -c -1 "$mnt/b"
            for i in 1 2 3 4; do dd if=/dev/urandom of="$mnt/b/s$i" bs=1M count=512 status=none; done
            # Unthrottled from the page cache, then from the disk (caches
            # dropped), then throttled.
            for how in cached disk rate100; do
                rate=0; [ "$how" = rate100 ] && rate=100
                [ "$how" = disk ] && { sync; echo 3 >/proc/sys/vm/drop_caches; }
                s=$(date +%s.%N)
                "$loom" scrub --rate $rate "$mnt" >/dev/null 2>&1
                e=$(date +%s.%N)
                awk -v r="$round" -v how="$how" -v s="$s" -v e="$e" \
                    'BEGIN { printf "%s scrub %s: 2048 MiB in %.2f s = %.0f MiB/s\n", r, how, e - s, 2048 / (e - s) }' \
                    | tee -a "$out/scrub.txt"
            done
        fi
        "$loom" down --dir "$state" >/dev/null 2>&1
        wait
    done
done
python3 - "$out" "$rounds" <<'EOF'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
for work in ["easy", "hard"]:
    print(f"== IOR {work}: medians of {rounds} rounds, MiB/s")
    for b in ["old", "new"]:
        vals = {}
        for r in range(1, rounds + 1):
            d = json.load(open(f"{out}/{work}-{b}-{r}.json"))
            for t in d["targets"]:
                for p in t["phases"]:
                    for smp in p["samples"]:
                        vals.setdefault((t["name"], p["phase"]), []).append(smp["value"])
        line = "  ".join(f"{n} {ph} {statistics.median(v):.0f}" for (n, ph), v in sorted(vals.items()))
        print(f"{b}: {line}")
EOF
cat "$out/scrub.txt"
