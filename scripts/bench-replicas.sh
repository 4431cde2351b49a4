#!/usr/bin/env bash
# What replicated OSTs cost (issue #33): one loom build, unreplicated
# against `--replicas 2`, interleaved round by round (the order alternates)
# in one run, each on a fresh `loom up --mdts 2 --osts 4`, ext4 beside
# each loomfs figure in the same compare:
#
#   ./scripts/bench-replicas.sh LOOM [ROUNDS]    (as root; default 3)
#
#   md      loom bench compare md -F -u -n 2000 -p 4: create, stat, remove
#   easy    IOR easy, -t 1m -b 256m -p 2 -F -w -r -e (fsync in the write)
#   hard    IOR hard, -t 47008 -b 47008 -s 2000 -p 2 -w -r -e, one shared file
# Results: /var/tmp/loom-replicas/ (JSON per run), medians at the end.
set -euo pipefail
[ $# -ge 1 ] && [ -x "$1" ] || { echo "usage: bench-replicas.sh LOOM [ROUNDS]" >&2; exit 2; }
loom=$(realpath "$1") rounds=${2:-3}
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "bench-replicas.sh: ROUNDS must be a positive number" >&2; exit 2; }
state=/var/tmp/loom-replicas-state mnt=/mnt/loom-replicas
ext4=/var/tmp/loom-replicas-ext4 out=/var/tmp/loom-replicas
trap '"$loom" down --dir "$state" >/dev/null 2>&1 || true' EXIT
rm -rf "$out"; mkdir -p "$out" "$ext4"
wait_up() {
    for _ in $(seq 1 600); do grep -q "^mounted at" "$1" 2>/dev/null && return 0; sleep 0.1; done
    cat "$1"; return 1
}
for round in $(seq 1 "$rounds"); do
    order="1 2"; [ $((round % 2)) = 0 ] && order="2 1"
    for r in $order; do
        "$loom" down --dir "$state" >/dev/null 2>&1 || true
        rm -rf "$state" "${ext4:?}"/*
        extra=(); [ "$r" = 2 ] && extra=(--replicas 2)
        "$loom" up --mdts 2 --osts 4 "${extra[@]}" --dir "$state" --mount "$mnt" >"$out/up.log" 2>&1 &
        wait_up "$out/up.log"
        mkdir -p "$mnt/b"
        (cd "$out" && timeout 900 "$loom" bench compare md -F -u -n 2000 -p 4 --no-progress \
            --json "$out/md-r$r-$round.json" ext4=$ext4 loomfs=$mnt/b >"$out/md-r$r-$round.txt")
        (cd "$out" && timeout 900 "$loom" bench compare io -t 1m -b 256m -p 2 -F -w -r -e --no-progress \
            --json "$out/easy-r$r-$round.json" ext4=$ext4 loomfs=$mnt/b >"$out/easy-r$r-$round.txt")
        (cd "$out" && timeout 900 "$loom" bench compare io -t 47008 -b 47008 -s 2000 -p 2 -w -r -e --no-progress \
            --json "$out/hard-r$r-$round.json" ext4=$ext4 loomfs=$mnt/b >"$out/hard-r$r-$round.txt")
        "$loom" down --dir "$state" >/dev/null 2>&1
        wait
    done
done
python3 - "$out" "$rounds" <<'PY'
import json, statistics, sys
out, rounds = sys.argv[1], int(sys.argv[2])
def figures(work, r):
    vals = {}
    for n in range(1, rounds + 1):
        d = json.load(open(f"{out}/{work}-r{r}-{n}.json"))
        for t in d["targets"]:
            for p in t["phases"]:
                for s in p["samples"]:
                    vals.setdefault((t["name"], p["phase"]), []).append(s["value"])
    return vals
print(f"medians of {rounds} rounds (per-round values in brackets); ratio = replicas 2 / unreplicated")
for work in ["md", "easy", "hard"]:
    one, two = figures(work, 1), figures(work, 2)
    for key in sorted(one):
        name, phase = key
        a, b = one[key], two.get(key, [])
        if not b:
            continue
        ma, mb = statistics.median(a), statistics.median(b)
        ratio = f"{mb / ma:.2f}" if name == "loomfs" and ma else ""
        print(f"{work:5} {phase:8} {name:7} 1: {ma:10.0f} {[round(x) for x in a]}  2: {mb:10.0f} {[round(x) for x in b]}  {ratio}")
PY
