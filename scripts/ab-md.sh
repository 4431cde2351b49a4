#!/usr/bin/env bash
# A/B of two loom builds on the metadata path only (what a change to the
# request path costs), interleaved round by round:
#
#   ./scripts/ab-md.sh OLD_LOOM NEW_LOOM [ROUNDS]   (as root; default 5 rounds)
#
# Each round, for each build in turn: a fresh `loom up --mdts 2 --osts 4`
# and `loom bench compare md -F -u -n 2000 -p 4 -i 1` on it beside the
# no-op FUSE reference (same run). Results in /var/tmp/loom-ab-md/, and
# the medians of the loomfs create, stat and remove rates at the end.
# MD_ARGS replaces `-n 2000` (e.g. "-n 1000 -w 4096 -e 4096": the gate's
# md4k, 4 KiB files written and read).
set -euo pipefail
source "$(dirname "$0")/ab-lib.sh"
ab_init ab-md.sh 5 "$@"
state=/var/tmp/loom-ab-md-state mnt=/mnt/loom-ab-md out=/var/tmp/loom-ab-md
rm -rf "$out"; mkdir -p "$out"
for round in $(seq 1 "$rounds"); do
    for b in old new; do
        loom=${bin[$b]}
        ab_fresh_cluster "$loom" "$state" "$mnt" "$out/up.log"
        mkdir -p "$mnt/b"
        (cd "$out" && "$loom" bench compare md -F -u ${MD_ARGS:--n 2000} -p 4 -i 1 --no-progress \
            --json "$out/md-$b-$round.json" noop=noop:?attr-timeout=300 loomfs=$mnt/b >"$out/md-$b-$round.txt")
        "$loom" down --dir "$state" >/dev/null 2>&1
        wait
    done
done
python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
for b in ["old", "new"]:
    vals = {}
    for r in range(1, rounds + 1):
        d = json.load(open(f"{out}/md-{b}-{r}.json"))
        for t in d["targets"]:
            for p in t["phases"]:
                for s in p["samples"]:
                    vals.setdefault((t["name"], p["phase"]), []).append(s["value"])
    print(b + ": " + "  ".join(f"{n} {ph} {statistics.median(v):.0f} ({min(v):.0f}-{max(v):.0f})" for (n, ph), v in sorted(vals.items())))
PY
