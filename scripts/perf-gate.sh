#!/usr/bin/env bash
# The performance gate: every figure the project claims, for two loom
# builds, interleaved round by round in one run, and a verdict.
#
#   ./scripts/perf-gate.sh OLD_LOOM NEW_LOOM [ROUNDS]   (as root; default 3)
#
# It builds nothing: give it two release binaries, e.g. the last release
# build kept aside and the one under test (see docs/BENCHMARKS.md, "The
# performance gate"). Each round runs both builds, in turn (the order
# alternates from round to round so that the machine's drifts fall on
# both alike), each on a fresh `loom up --mdts 2 --osts 4`:
#   md      loom bench compare md -F -u -n 2000 -p 4: create, stat, remove
#   md4k    the same with 4 KiB files (-n 1000 -w 4096 -e 4096): create, read
#   untar   tar xf of /usr/include, seconds
#   easy    IOR easy, loom bench compare io -t 1m -b 256m -p 2 -F -w -r -C
#   easy-e  the same, write phase with fsync inside its time (-e)
#   hard    IOR hard, -t 47008 -b 47008 -s 2000 -p 2 -w -r -C, one shared file
#   noop    the no-op FUSE ceiling (NEW's, since it is the machine's and
#           older builds lack it) beside tmpfs: md, IOR easy
# ext4 runs beside each loomfs figure (same compare) as the local reference.
#
# Noise is measured, not guessed: for each figure, the largest distance of
# any round's value from its own build's median, over both builds. A
# figure regresses when NEW's median is worse than OLD's by more than
# that noise, or when NEW is worse than OLD by more than 5% in every
# round (each round runs both builds back to back, so the machine's
# drift is shared) and their per-round ratios' median is more than 10%
# worse: on a noisy
# machine the noise grew past a 30% IOR-hard write loss that each of the
# three rounds showed (0.89, 0.85, 0.72). The table prints each figure
# for both builds, their ratio and the noise; the exit status is 1 if
# any figure regressed.
# Results: /var/tmp/loom-gate/ (JSON per run, times), table at the end.
set -euo pipefail
source "$(dirname "$0")/ab-lib.sh"
ab_init perf-gate.sh 3 "$@"
state=/var/tmp/loom-gate-state mnt=/mnt/loom-gate
ext4=/var/tmp/loom-gate-ext4 tmpfs=/dev/shm/loom-gate-tmpfs tarball=/var/tmp/loom-bench-include.tar
out=/var/tmp/loom-gate
[ -f "$tarball" ] || tar cf "$tarball" -C /usr include
rm -rf "$out" "$ext4" "$tmpfs"; mkdir -p "$out" "$ext4" "$tmpfs"

run() { # NAME BUILD ROUND LOOM -- bench compare arguments
    local name=$1 b=$2 round=$3 loom=$4
    shift 5
    ab_run "$out" "$loom" "$name-$b-$round" -- "$@"
}

for round in $(seq 1 "$rounds"); do
    order="old new"
    [ $((round % 2)) -eq 0 ] && order="new old"
    for b in $order; do
        echo "== round $round of $rounds: $b (${bin[$b]})" >&2
        ab_fresh_cluster "${bin[$b]}" "$state" "$mnt" "$out/up.log"
        mkdir -p "$mnt/md" "$mnt/md4k" "$mnt/io" "$mnt/untar"
        loom=${bin[$b]}
        run md "$b" "$round" "$loom" -- md -F -u -n 2000 -p 4 -i 1 \
            ext4="$ext4" loomfs="$mnt/md"
        run md4k "$b" "$round" "$loom" -- md -F -u -n 1000 -p 4 -i 1 -w 4096 -e 4096 \
            ext4="$ext4" loomfs="$mnt/md4k"
        run easy "$b" "$round" "$loom" -- io -t 1m -b 256m -p 2 -F -w -r -C \
            ext4="$ext4" loomfs="$mnt/io"
        run easy-e "$b" "$round" "$loom" -- io -t 1m -b 256m -p 2 -F -w -e \
            ext4="$ext4" loomfs="$mnt/io"
        run hard "$b" "$round" "$loom" -- io -t 47008 -b 47008 -s 2000 -p 2 -w -r -C \
            ext4="$ext4" loomfs="$mnt/io"
        # The FUSE ceiling is the machine's, not a build's (and builds
        # before it cannot mount it): NEW's no-op reference, beside
        # tmpfs, in each build's turn.
        run noop-md "$b" "$round" "${bin[new]}" -- md -F -u -n 2000 -p 4 -i 1 \
            tmpfs="$tmpfs" noop=noop:
        run noop-easy "$b" "$round" "${bin[new]}" -- io -t 1m -b 256m -p 2 -F -w -r -C \
            tmpfs="$tmpfs" noop=noop:
        for t in ext4="$ext4" loomfs="$mnt/untar"; do
            dir=${t#*=}/x
            rm -rf "$dir"; mkdir -p "$dir"; sync
            s=$(date +%s.%N); tar xf "$tarball" -C "$dir"; e=$(date +%s.%N)
            rm -rf "$dir"
            echo "$round $b ${t%%=*} $s $e" >>"$out/untar.txt"
        done
        "${bin[$b]}" down --dir "$state" >/dev/null
        wait
    done
done

python3 - "$out" "$rounds" <<'PY'
import collections, glob, json, statistics as st, sys
out, rounds = sys.argv[1], int(sys.argv[2])
v = collections.defaultdict(list)  # (figure, build) -> values per round
by_round = collections.defaultdict(dict)  # (figure, build) -> {round: value}
for f in glob.glob(f"{out}/*-*-*.json"):
    name, b, r = f.rsplit("/", 1)[1][:-5].rsplit("-", 2)
    for s in json.load(open(f))["summaries"]:
        fig = f"{name} {s['phase']} [{s['target']}]"
        v[(fig, b)].append(s["summary"]["median"])
        by_round[(fig, b)][r] = s["summary"]["median"]
for line in open(f"{out}/untar.txt"):
    r, b, t, s, e = line.split()
    v[(f"untar seconds [{t}]", b)].append(float(e) - float(s))
    by_round[(f"untar seconds [{t}]", b)][r] = float(e) - float(s)
PAIRED = 0.10
keep = ["File creation", "File stat", "File removal", "File read", "write", "read", "untar"]
figs = sorted({k for k, _ in v if any(p in k for p in keep) and "[loomfs]" in k})
print(f"{'figure':42} {'old':>10} {'new':>10} {'new/old':>8} {'noise':>7}  verdict")
bad = 0
for fig in figs:
    old, new = v[(fig, "old")], v[(fig, "new")]
    if not old or not new:
        continue
    mo, mn = st.median(old), st.median(new)
    noise = max(abs(x - m) / m for xs, m in [(old, mo), (new, mn)] for x in xs)
    lower_better = fig.startswith("untar")
    ratio = mn / mo
    # NEW against OLD in the same round, where the machine's drift is
    # shared (seconds inverted, so that below 1 is worse everywhere).
    o, n = by_round[(fig, "old")], by_round[(fig, "new")]
    paired = [(o[r] / n[r] if lower_better else n[r] / o[r]) for r in o if r in n]
    gain = ratio if not lower_better else 1 / ratio
    # Beyond the noise; or worse by more than PAIRED / 2 in every round
    # and by more than PAIRED in their median (a noisy run's noise can
    # hide a loss that every round shows).
    worse = gain < 1 - noise or (
        len(paired) >= 3 and max(paired) < 1 - PAIRED / 2 and st.median(paired) < 1 - PAIRED)
    better = gain > 1 + noise or (
        len(paired) >= 3 and min(paired) > 1 + PAIRED / 2 and st.median(paired) > 1 + PAIRED)
    verdict = "REGRESSED" if worse else ("better" if better else "same")
    bad += worse
    print(f"{fig:42} {mo:10.1f} {mn:10.1f} {ratio:8.2f} {noise*100:6.0f}%  {verdict}")
print("\nreferences, medians of all rounds (measured in each build's turn):")
for fig in sorted({k for k, _ in v if any(p in k for p in keep) and "[loomfs]" not in k}):
    xs = v[(fig, "old")] + v[(fig, "new")]
    print(f"  {fig:42} {st.median(xs):10.1f}")
def med(fig, b):
    return st.median(v[(fig, b)]) if v[(fig, b)] else float("nan")
ext = lambda fig: st.median(v[(fig, "old")] + v[(fig, "new")])
print("\nloomfs against ext4 (new build):")
for ph in ["hard read", "hard write", "easy write", "easy-e write", "easy read"]:
    name, phase = ph.rsplit(" ", 1)
    lo, e = med(f"{name} {phase} [loomfs]", "new"), ext(f"{name} {phase} [ext4]")
    print(f"  {ph:14} {lo:10.1f} / {e:10.1f} = {lo / e * 100:5.0f}%")
print(f"\n{bad} figure(s) regressed beyond their noise" if bad else "\nno figure regressed beyond its noise")
sys.exit(1 if bad else 0)
PY
