#!/usr/bin/env bash
# CPU seconds the mount and the OSTs spend on one IOR-hard write, per
# build: a steadier measure than MiB/s on a noisy machine where the
# mount, the OSTs and the benchmark share the CPUs (issue #34).
#
#   ./scripts/cpu-per-run.sh ROUNDS LOOM...   (as root)
#
# Each round, for each build (the order rotated every round), after
# `sync` and a page-cache drop: a fresh `loom up --mdts 2 --osts 4`, then
# `loom bench io -t 47008 -b 47008 -s 2000 -p 2 -w` (ARGS overrides
# `-w`), reading the mount's and the OSTs' utime+stime from /proc before
# and after. Prints one line per run: build, write MiB/s, mount CPU s,
# OSTs' CPU s. It builds nothing.
set -uo pipefail
[ $# -ge 2 ] || { echo "usage: cpu-per-run.sh ROUNDS LOOM..." >&2; exit 2; }
[[ $1 =~ ^[1-9][0-9]*$ ]] || { echo "cpu-per-run.sh: ROUNDS must be a positive number, not '$1'" >&2; exit 2; }
rounds=$1
shift
for b in "$@"; do
    [ -x "$b" ] || { echo "cpu-per-run.sh: $b is not an executable loom binary" >&2; exit 2; }
done
source "$(dirname "$0")/ab-lib.sh"
state=/var/tmp/loom-cpu-state mnt=/mnt/loom-cpu
builds=("$@")
n=${#builds[@]}
cleanup() { for b in "${builds[@]}"; do "$b" down --dir "$state" >/dev/null 2>&1 || true; done; }
trap cleanup EXIT
cpu() { awk '{print ($14 + $15) / 100}' "/proc/$1/stat"; }
sum_cpu() { local t=0; for p in "$@"; do t=$(echo "$t + $(cpu "$p")" | bc); done; echo "$t"; }
mkdir -p "$mnt"
for r in $(seq 1 "$rounds"); do
    for k in $(seq 0 $((n - 1))); do
        loom=$(realpath "${builds[$(((k + r) % n))]}")
        sync
        echo 1 > /proc/sys/vm/drop_caches
        ab_fresh_cluster "$loom" "$state" "$mnt" /var/tmp/loom-cpu-up.log
        mkdir -p "$mnt/io"
        m=$(pgrep -f "$loom up --mdts")
        o=$(pgrep -f "$state/nodes/ost[0-9].toml")
        m0=$(cpu "$m") o0=$(sum_cpu $o)
        # shellcheck disable=SC2086
        w=$(timeout 300 "$loom" bench io -t 47008 -b 47008 -s 2000 -p 2 ${ARGS:--w} "$mnt/io" --no-progress 2>&1 |
            awk '/^ *write /{print $3; exit}')
        m1=$(cpu "$m") o1=$(sum_cpu $o)
        echo "$(basename "$loom") $w mount $(echo "$m1 - $m0" | bc) osts $(echo "$o1 - $o0" | bc)"
        "$loom" down --dir "$state" >/dev/null 2>&1 || true
    done
done
