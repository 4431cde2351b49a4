#!/usr/bin/env bash
# What the changelog costs: mdtest creates/removes and IOR easy writes
# with the changelog off and on (a consumer registered on every MDT),
# interleaved round by round, each on a fresh `loom up --mdts 2 --osts 4`
# (ext4 beside each, as the reference);
# and how fast a consumer reads the records (records/s).
#
#   ./scripts/bench-changelog.sh LOOM [ROUNDS]   (as root; default 3)
#
# Noise is measured as in perf-gate.sh: the largest distance of any
# round's value from its own state's median. Results: /var/tmp/loom-cl/.
set -euo pipefail
source "$(dirname "$0")/ab-lib.sh"
[ $# -ge 1 ] && [ -x "$1" ] || { echo "usage: $0 LOOM [ROUNDS]" >&2; exit 2; }
loom=$(realpath "$1") rounds=${2:-3}
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "$0: ROUNDS must be a positive number" >&2; exit 2; }
state=/var/tmp/loom-cl-state mnt=/mnt/loom-cl out=/var/tmp/loom-cl ext4=/var/tmp/loom-cl-ext4
bin=([old]=$loom [new]=$loom)
trap ab_cleanup EXIT
rm -rf "$out" "$ext4"; mkdir -p "$out" "$ext4"

run() { # NAME STATE ROUND -- bench compare arguments
    local name=$1 s=$2 round=$3
    shift 4
    ab_run "$out" "$loom" "$name-$s-$round" -- "$@"
}

for round in $(seq 1 "$rounds"); do
    order="off on"
    [ $((round % 2)) -eq 0 ] && order="on off"
    for s in $order; do
        echo "== round $round of $rounds: changelog $s" >&2
        ab_fresh_cluster "$loom" "$state" "$mnt" "$out/up.log"
        mkdir -p "$mnt/md" "$mnt/io"
        [ "$s" = on ] && "$loom" changelog register "$mnt" >/dev/null
        run md "$s" "$round" -- md -F -u -n 2000 -p 4 -i 1 ext4="$ext4" loomfs="$mnt/md"
        run easy "$s" "$round" -- io -t 1m -b 256m -p 2 -F -w ext4="$ext4" loomfs="$mnt/io"
        if [ "$s" = on ]; then
            b=$(date +%s.%N)
            n=$("$loom" changelog "$mnt" --json | wc -l)
            e=$(date +%s.%N)
            echo "$round $n $b $e" >>"$out/read.txt"
        fi
        "$loom" down --dir "$state" >/dev/null
        wait
    done
done

python3 "$(dirname "$0")/onoff-table.py" "$out" "File creation" "File removal" "write"
python3 - "$out" <<'PY'
import statistics as st, sys
out = sys.argv[1]
rates = []
for line in open(f"{out}/read.txt"):
    _, n, b, e = line.split()
    rates.append(int(n) / (float(e) - float(b)))
print(f"\nconsumer read (loom changelog --json, both MDTs): "
      f"{st.median(rates):,.0f} records/s median; rounds: "
      + ", ".join(f"{x:,.0f}" for x in rates))
PY
