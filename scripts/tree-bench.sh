#!/usr/bin/env bash
# Walking a tree on the mount that made it: untar /usr/include, then
# find, du -s and ls -lR of it, on two loom builds (a fresh `loom up
# --mdts 2 --osts 4` each), the no-op FUSE reference and ext4,
# interleaved round by round:
#
#   ./scripts/tree-bench.sh OLD_LOOM NEW_LOOM [ROUNDS]   (as root; default 3)
#
# Prints "ROUND TARGET find S du S lslR S" per target and round.
set -uo pipefail
[ $# -ge 2 ] || { sed -n 2,9p "$0"; exit 2; }
old=$1 new=$2 rounds=${3:-3}
T=/var/tmp/loom-bench-include.tar st=/var/tmp/tb-st mnt=/mnt/tb noop=/mnt/tb-noop ext4=/var/tmp/tb-ext4
[ -f $T ] || tar cf $T -C /usr include
mkdir -p $mnt $noop $ext4
trap '$old down --dir $st >/dev/null 2>&1; $new down --dir $st >/dev/null 2>&1; umount -l $noop 2>/dev/null; true' EXIT
t() { local s e; s=$(date +%s.%N); "$@" >/dev/null 2>&1; e=$(date +%s.%N); echo "$e - $s" | bc; }
run() { local name=$1 dir=$2; rm -rf $dir/u; mkdir -p $dir/u; tar xf $T -C $dir/u; echo "$r $name find $(t find $dir/u) du $(t du -s $dir/u) lslR $(t ls -lR $dir/u)"; }
for r in $(seq 1 $rounds); do
  for b in old new; do
    bin=${!b}
    $bin down --dir $st >/dev/null 2>&1; rm -rf $st
    ($bin up --mdts 2 --osts 4 --dir $st --mount $mnt > /tmp/tb-up.log 2>&1 &)
    for i in $(seq 1 300); do grep -q "^mounted at" /tmp/tb-up.log && break; sleep 0.2; done
    run $b $mnt
    $bin down --dir $st >/dev/null 2>&1
  done
  ($new mount-noop $noop --attr-timeout 300 > /tmp/tb-noop.log 2>&1 &); sleep 1
  run noop $noop; umount $noop; sleep 0.5
  run ext4 $ext4
done
