#!/usr/bin/env bash
# Interleaved A/B of two loom builds on library reads (issue #9, reading
# ahead by stripe): IOR-style 64 KiB transfers, a 256 MiB file per
# process striped over 4 OSTs in 1 MiB stripes, through the client
# library (loom:DIR), 1 and 2 processes; ext4 and tmpfs run the same
# workload in every round as the local references.
#
#   ./scripts/ab-readahead.sh OLD NEW [ROUNDS]
#
# Each build gets a fresh `loom up --mdts 1 --osts 4` per round. Prints
# one line per round, target and process count; results in
# /var/tmp/ab-readahead.results.
set -euo pipefail
old=${1:?usage: ab-readahead.sh OLD NEW [ROUNDS]}
new=${2:?usage: ab-readahead.sh OLD NEW [ROUNDS]}
rounds=${3:-3}
for b in "$old" "$new"; do
    [ -x "$b" ] || { echo "ab-readahead.sh: $b is not an executable loom binary" >&2; exit 2; }
done
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "ab-readahead.sh: ROUNDS must be a positive number, not '$rounds'" >&2; exit 2; }
out=/var/tmp/ab-readahead.results
: >"$out"
cleanup() {
    for b in old new; do
        "${!b}" down --dir "/var/tmp/ab-ra-$b" >/dev/null 2>&1 || true
        rm -rf "/var/tmp/ab-ra-$b"
    done
    rm -rf /var/tmp/ab-ra-ext4 /dev/shm/ab-ra-tmpfs /var/tmp/ab-ra-run.txt /var/tmp/ab-ra-up.log
}
trap cleanup EXIT
run() { # name, binary, target, procs
    "$2" bench io -t 64k -b 256m -p "$4" -F --no-progress "$3" >/var/tmp/ab-ra-run.txt 2>&1
    echo "round $r $1 p=$4: $(grep -iE '^\s*(write|read)\b' /var/tmp/ab-ra-run.txt | tr -s ' ' | tr '\n' '|')" | tee -a "$out"
}
for r in $(seq 1 "$rounds"); do
    for l in ext4:/var/tmp/ab-ra-ext4 tmpfs:/dev/shm/ab-ra-tmpfs; do
        n=${l%%:*} d=${l#*:}
        rm -rf "$d"; mkdir -p "$d"
        for p in 1 2; do run "$n" "$new" "$d" "$p"; done
        rm -rf "$d"
    done
    for b in old new; do
        bin=${!b} st=/var/tmp/ab-ra-$b mnt=/mnt/ab-ra-$b
        "$bin" up --mdts 1 --osts 4 --dir "$st" --mount "$mnt" >/var/tmp/ab-ra-up.log 2>&1 &
        for _ in $(seq 300); do grep -q "^mounted at" /var/tmp/ab-ra-up.log && break; sleep 0.1; done
        grep -q "^mounted at" /var/tmp/ab-ra-up.log || { cat /var/tmp/ab-ra-up.log; exit 1; }
        mkdir -p "$mnt/d"
        "$bin" setstripe -c -1 -S 1M "$mnt/d"
        for p in 1 2; do run "$b" "$bin" "loom:$mnt/d" "$p"; done
        "$bin" down --dir "$st" >/dev/null 2>&1 || true
        rm -rf "$st"
    done
done
