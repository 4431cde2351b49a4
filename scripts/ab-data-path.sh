#!/usr/bin/env bash
# The data path over several loom builds (an A/B over commits, issue #34),
# interleaved round by round so the machine's drifts fall on all alike:
#
#   ./scripts/ab-data-path.sh ROUNDS LOOM...   (as root)
#
# Each LOOM is a release binary, named in the table by its file name (keep
# them as e.g. /var/tmp/bins/loom-REV). Each round, for each build in turn
# (the order reversed every other round), on a fresh `loom up --mdts 2
# --osts 4`, with ext4 beside it in the same `loom bench compare`:
#   easy  IOR easy, -t 1m -b 256m -p 2 -F -w -r -C
#   hard  IOR hard, -t 47008 -b 47008 -s 2000 -p 2 -w -r -C
# Results: /var/tmp/loom-ab-data/ (JSON per run); medians and min-max
# printed at the end. It builds nothing.
set -euo pipefail
[ $# -ge 2 ] || { echo "usage: ab-data-path.sh ROUNDS LOOM..." >&2; exit 2; }
[[ $1 =~ ^[1-9][0-9]*$ ]] || { echo "ab-data-path.sh: ROUNDS must be a positive number, not '$1'" >&2; exit 2; }
rounds=$1
shift
builds=()
for b in "$@"; do
    [ -x "$b" ] || { echo "ab-data-path.sh: $b is not an executable loom binary" >&2; exit 2; }
    builds+=("$(realpath "$b")")
done
state=/var/tmp/loom-ab-data-state mnt=/mnt/loom-ab-data
ext4=/var/tmp/loom-ab-data-ext4 out=/var/tmp/loom-ab-data
rm -rf "$out" "$ext4"; mkdir -p "$out" "$ext4"
cleanup() { for b in "${builds[@]}"; do "$b" down --dir "$state" >/dev/null 2>&1 || true; done; }
trap cleanup EXIT
for round in $(seq 1 "$rounds"); do
    order=("${builds[@]}")
    if [ $((round % 2)) -eq 0 ]; then
        order=()
        for ((i = ${#builds[@]} - 1; i >= 0; i--)); do order+=("${builds[$i]}"); done
    fi
    for loom in "${order[@]}"; do
        name=$(basename "$loom")
        echo "== round $round of $rounds: $name" >&2
        "$loom" down --dir "$state" >/dev/null 2>&1 || true
        rm -rf "$state"
        "$loom" up --mdts 2 --osts 4 --dir "$state" --mount "$mnt" >"$out/up.log" 2>&1 &
        for _ in $(seq 1 300); do grep -q "^mounted at" "$out/up.log" && break; sleep 0.1; done
        grep -q "^mounted at" "$out/up.log" || { cat "$out/up.log"; exit 1; }
        mkdir -p "$mnt/io"
        for w in easy hard; do
            [ $w = easy ] && args=(-t 1m -b 256m) || args=(-t 47008 -b 47008 -s 2000)
            (cd "$out" && timeout 900 "$loom" bench compare io "${args[@]}" -p 2 -w -r -C \
                $([ $w = easy ] && echo -F) --no-progress --json "$out/$w~$name~$round.json" \
                ext4="$ext4" loomfs="$mnt/io" >"$out/$w~$name~$round.txt")
        done
        "$loom" down --dir "$state" >/dev/null
        wait
    done
done
python3 - "$out" "$@" <<'PY'
import collections, glob, json, os, statistics as st, sys
out, names = sys.argv[1], [os.path.basename(b) for b in sys.argv[2:]]
v = collections.defaultdict(list)
for f in glob.glob(f"{out}/*~*~*.json"):
    w, name, _ = os.path.basename(f)[:-5].split("~")
    for s in json.load(open(f))["summaries"]:
        v[(name, f"{w} {s['phase']} [{s['target']}]")].append(s["summary"]["median"])
cols = ["easy write [loomfs]", "easy read [loomfs]", "hard write [loomfs]", "hard read [loomfs]",
        "easy write [ext4]", "hard read [ext4]"]
print("MiB/s, median (min-max) of the rounds")
print(f"{'build':22} " + " ".join(f"{c:>24}" for c in cols))
for n in names:
    cells = []
    for c in cols:
        xs = v[(n, c)]
        cells.append(f"{st.median(xs):8.0f} ({min(xs):.0f}-{max(xs):.0f})" if xs else "-")
    print(f"{n:22} " + " ".join(f"{c:>24}" for c in cells))
PY
