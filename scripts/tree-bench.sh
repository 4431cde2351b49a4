#!/usr/bin/env bash
# Untar /usr/include, then find, du -s, ls -lR on it: OLD and NEW loom
# builds (fresh `loom up --mdts 2 --osts 4` each), the no-op FUSE
# reference and ext4, interleaved, ROUNDS rounds.
set -uo pipefail
old=$1 new=$2 rounds=${3:-3}
T=/var/tmp/loom-bench-include.tar st=/var/tmp/tb-st mnt=/mnt/tb noop=/mnt/tb-noop ext4=/var/tmp/tb-ext4
mkdir -p $mnt $noop $ext4
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
