#!/usr/bin/env bash
# What bounds IOR easy with fsync (-e): rounds of `loom bench compare io
# -t 1m -b 256m -p 2 -F -w -e`, then the same without -e, on ext4, a
# fresh loomfs (`loom up --mdts 2 --osts 4`), the no-op FUSE file system
# and tmpfs, in one compare each. Prints each round's write figures.
#   ./scripts/io-fsync-ceiling.sh LOOM [ROUNDS] [OUT]   (as root; default 3)
set -euo pipefail
source "$(dirname "$0")/ab-lib.sh"
[ -x "${1:-}" ] || { echo "usage: io-fsync-ceiling.sh LOOM [ROUNDS] [OUT] (LOOM: a loom binary)" >&2; exit 2; }
[[ ${2:-3} =~ ^[1-9][0-9]*$ ]] || { echo "io-fsync-ceiling.sh: ROUNDS must be a positive number, not '$2'" >&2; exit 2; }
loom=$(realpath "$1"); rounds=${2:-3}; out=${3:-/var/tmp/loom-io-fsync}
state=/var/tmp/loom-io-fsync-state mnt=/mnt/loom-io-fsync
ext4=/var/tmp/loom-io-fsync-ext4 tmpfs=/dev/shm/loom-io-fsync
rm -rf "$out"; mkdir -p "$out" "$ext4" "$tmpfs" "$mnt"
bin=([old]=$loom [new]=$loom); trap ab_cleanup EXIT
ab_fresh_cluster "$loom" "$state" "$mnt" "$out/up.log"
mkdir -p "$mnt/io"
for r in $(seq 1 "$rounds"); do
    for e in -e ""; do
        name=w${e}-$r
        ab_run "$out" "$loom" "$name" -- io -t 1m -b 256m -p 2 -F -w $e \
            ext4="$ext4" loomfs="$mnt/io" noop=noop: tmpfs="$tmpfs"
        echo "round $r ${e:-no fsync}: $(grep '^write ' "$out/$name.txt")"
    done
done
