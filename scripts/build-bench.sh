#!/usr/bin/env bash
# A software build on the mount (issue #9's goal: `make -j2` of a C project
# of a few hundred files at most 1.3 times its time on ext4):
#
#   ./scripts/build-bench.sh LOOM_BINARY [ROUNDS] [FILES]   (as root; 3 rounds, 300 files)
#
# Generates a C project (FILES .c files, each including system headers and
# a few of the project's own, a Makefile with dependency files, one
# program linked from all), then, round by round and target by target
# (ext4, tmpfs, loomfs with the default layout, loomfs with Data-on-MDT:
# `setstripe -E 64K -L mdt -E -1 -c 1`): copy the tree in, `make -j2`,
# `make -j2` again with nothing to do (every file stat'ed), `make clean`.
# A fresh `loom up --mdts 2 --osts 4` serves the run. Wall seconds per step
# go to /var/tmp/loom-build/times.txt; medians are printed at the end.
set -euo pipefail
[ $# -ge 1 ] && [ -x "$1" ] || { echo "usage: $0 LOOM_BINARY [ROUNDS] [FILES]" >&2; exit 2; }
loom=$(realpath "$1") rounds=${2:-3} files=${3:-300}
[[ $rounds =~ ^[1-9][0-9]*$ && $files =~ ^[1-9][0-9]*$ ]] || { echo "ROUNDS and FILES must be positive numbers" >&2; exit 2; }
out=/var/tmp/loom-build src=/var/tmp/loom-build/src
state=/var/tmp/loom-build-state mnt=/mnt/loom-build
ext4=/var/tmp/loom-build-ext4 tmpfs=/dev/shm/loom-build-tmpfs
rm -rf "$out" "$ext4" "$tmpfs"; mkdir -p "$src/include" "$ext4" "$tmpfs" "$mnt"

# The project: FILES sources in 10 directories, 20 headers.
for h in $(seq 0 19); do
    cat >"$src/include/mod$h.h" <<EOF
#ifndef MOD${h}_H
#define MOD${h}_H
#include <stddef.h>
#include <stdint.h>
struct mod${h}_state { uint64_t acc; double scale; char name[32]; };
uint64_t mod${h}_step(struct mod${h}_state *s, uint64_t x);
#define MOD${h}_K ${h}u
#endif
EOF
done
for i in $(seq 0 $((files - 1))); do
    d=$src/src/d$((i % 10)); mkdir -p "$d"
    a=$((i % 20)) b=$(((i * 7) % 20))
    cat >"$d/f$i.c" <<EOF
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <math.h>
#include "mod$a.h"
#include "mod$b.h"
static uint64_t mix$i(uint64_t x) { x ^= x >> 33; x *= 0xff51afd7ed558ccdULL; x ^= x >> 33; return x + MOD${a}_K; }
static double curve$i(double v) { double r = 0; for (int k = 1; k < 8; k++) r += sin(v * k) / k; return r; }
uint64_t f$i(uint64_t seed) {
    char buf[64]; snprintf(buf, sizeof buf, "f$i:%llu", (unsigned long long)seed);
    uint64_t h = mix$i(seed) ^ strlen(buf);
    for (int k = 0; k < 16; k++) h = mix$i(h + (uint64_t)curve$i((double)k));
    return h;
}
EOF
done
{
    echo 'SRCS := $(wildcard src/*/*.c)'
    echo 'OBJS := $(SRCS:.c=.o)'
    echo 'CFLAGS := -O2 -Iinclude -MMD -MP'
    echo 'prog: $(OBJS) main.o'
    echo '	$(CC) -o $@ $^ -lm'
    echo '-include $(OBJS:.o=.d) main.d'
    echo 'clean:'
    echo '	rm -f prog main.o main.d $(OBJS) $(OBJS:.o=.d)'
} >"$src/Makefile"
{
    echo '#include <stdio.h>'
    echo '#include <stdint.h>'
    for i in $(seq 0 $((files - 1))); do echo "uint64_t f$i(uint64_t);"; done
    echo 'int main(void) { uint64_t h = 0;'
    for i in $(seq 0 $((files - 1))); do echo "h ^= f$i(h);"; done
    echo 'printf("%llu\n", (unsigned long long)h); return 0; }'
} >"$src/main.c"

cleanup() { "$loom" down --dir "$state" >/dev/null 2>&1 || true; }
trap cleanup EXIT
"$loom" down --dir "$state" >/dev/null 2>&1 || true
rm -rf "$state"
"$loom" up --mdts 2 --osts 4 --dir "$state" --mount "$mnt" >"$out/up.log" 2>&1 &
for _ in $(seq 1 300); do grep -q "^mounted at" "$out/up.log" && break; sleep 0.1; done
grep -q "^mounted at" "$out/up.log" || { cat "$out/up.log"; exit 1; }
mkdir -p "$mnt/plain" "$mnt/dom"
"$loom" setstripe -E 64K -L mdt -E -1 -c 1 "$mnt/dom"

want=""
for round in $(seq 1 "$rounds"); do
    for t in ext4=$ext4 tmpfs=$tmpfs loomfs=$mnt/plain loomfs-dom=$mnt/dom; do
        name=${t%%=*} dir=${t#*=}/proj
        rm -rf "$dir"; sync
        s=$(date +%s.%N); cp -r "$src" "$dir"; c=$(date +%s.%N)
        make -s -C "$dir" -j2 prog >/dev/null; m=$(date +%s.%N)
        make -s -C "$dir" -j2 prog >/dev/null; n=$(date +%s.%N)
        got=$("$dir/prog")
        [ -z "$want" ] && want=$got
        [ "$got" = "$want" ] || { echo "$name: the program built there printed $got, not $want" >&2; exit 1; }
        make -s -C "$dir" clean; e=$(date +%s.%N)
        awk -v r="$round" -v n="$name" -v s="$s" -v c="$c" -v m="$m" -v o="$n" -v e="$e" \
            'BEGIN { printf "%s %s copy %.2f make %.2f nothing %.2f clean %.2f\n", r, n, c - s, m - c, o - m, e - o }' \
            | tee -a "$out/times.txt"
        rm -rf "$dir"
    done
done
python3 - "$out/times.txt" <<'PY'
import collections, statistics as st, sys
t = collections.defaultdict(list)
for line in open(sys.argv[1]):
    w = line.split()
    for k in range(2, len(w), 2):
        t[(w[1], w[k])].append(float(w[k + 1]))
print("seconds, median (min-max) of the rounds; / ext4")
for step in ["copy", "make", "nothing", "clean"]:
    base = st.median(t[("ext4", step)])
    cells = []
    for n in ["ext4", "tmpfs", "loomfs", "loomfs-dom"]:
        v = t[(n, step)]
        cells.append(f"{n} {st.median(v):.2f} ({min(v):.2f}-{max(v):.2f}, {st.median(v) / max(base, 0.005):.2f}x)")
    print(f"  {step:8} " + ", ".join(cells))
PY
