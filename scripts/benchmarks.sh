#!/usr/bin/env bash
# Reproduce the figures of docs/BENCHMARKS.md: build loom (release), start a
# local cluster with `loom up`, and run `loom bench compare` of loomfs
# (through FUSE, and through the client library with no FUSE) against a
# local ext4 directory and tmpfs, interleaved target by target for each
# iteration. Results (JSON) and charts (SVG, PNG) go to docs/charts/.
#
#   ./scripts/benchmarks.sh [md|io|sweep|dne|io500|ceiling|all]   (as root; default all)
#
# `ceiling` measures issue #8's targets: loomfs (loom up --mdts 2 --osts 4)
# against ext4, tmpfs and the no-op FUSE reference (the most FUSE allows
# here), with loom bench md and with tar/rm -rf of /usr/include.
#
# Needs what `./scripts/run.sh demo` installs.
set -euo pipefail
cd "$(dirname "$0")/.."
what="${1:-all}"
out=docs/charts
loom=target/release/loom
state=/var/tmp/loom-bench-state
mnt=/mnt/loom-bench
ext4=/var/tmp/loom-bench-ext4
tmpfs=/dev/shm/loom-bench-tmpfs

cargo build --release -q -p loom
mkdir -p "$out" "$ext4" "$tmpfs"

up() { # up MDTS OSTS: a fresh cluster, mounted on $mnt
    "$loom" down --dir "$state" >/dev/null 2>&1 || true
    umount -l "$mnt" 2>/dev/null || true
    rm -rf "$state"
    "$loom" up --mdts "$1" --osts "$2" --dir "$state" --mount "$mnt" >/var/tmp/loom-bench-up.log 2>&1 &
    for _ in $(seq 1 300); do
        grep -q "^mounted at" /var/tmp/loom-bench-up.log 2>/dev/null && break
        sleep 0.1
    done
    grep -q "^mounted at" /var/tmp/loom-bench-up.log || { cat /var/tmp/loom-bench-up.log; exit 1; }
    mkdir -p "$mnt/b"
}
down() { "$loom" down --dir "$state" >/dev/null; }
trap 'down 2>/dev/null || true' EXIT

targets() { echo "ext4=$ext4 tmpfs=$tmpfs loomfs=$mnt/b loomfs-lib=loom:$mnt/b"; }

if [[ $what == md || $what == all ]]; then
    up 1 4
    # Empty files, one directory shared by 2 processes (mdtest -F -n 2000).
    "$loom" bench compare md -F -n 2000 -p 2 -i 5 --no-progress \
        --json "$out/md-shared.json" --chart "$out/md-shared" $(targets)
    # The same with a directory per process (mdtest -u).
    "$loom" bench compare md -F -u -n 2000 -p 2 -i 5 --no-progress \
        --json "$out/md-unique.json" --chart "$out/md-unique" $(targets)
    # Small files: 3901 bytes written and read (IO500's mdtest-hard size).
    "$loom" bench compare md -F -u -n 1000 -p 2 -i 5 -w 3901 -e 3901 --no-progress \
        --json "$out/md-small.json" --chart "$out/md-small" $(targets)
    down
fi

if [[ $what == io || $what == all ]]; then
    up 1 4
    "$loom" setstripe -c 4 -S 1M "$mnt/b"
    # 1 MiB streaming, one process, file per process, fsync in the write phase.
    "$loom" bench compare io -t 1m -b 512m -F -e -p 1 -i 5 --no-progress \
        --json "$out/io-stream.json" --chart "$out/io-stream" $(targets)
    # Two processes sharing one file (IOR's segmented layout).
    "$loom" bench compare io -t 1m -b 256m -e -p 2 -i 5 --no-progress \
        --json "$out/io-shared.json" --chart "$out/io-shared" $(targets)
    down
fi

if [[ $what == sweep || $what == all ]]; then
    # Bandwidth against the number of OSTs: 4 processes, a file each, so
    # that round-robin placement spreads them over the OSTs there are.
    "$loom" bench sweep --param osts --values 1,2,4 --loom "$loom" --no-progress \
        --json "$out/sweep-osts.json" --chart "$out/sweep-osts" \
        io -t 1m -b 128m -F -e -p 4 -i 3
fi

if [[ $what == dne || $what == all ]]; then
    # Remote against striped directories over 1, 2 and 4 MDTs, on one
    # cluster with 4 MDTs: 4 processes in one shared directory, through
    # the client library (one FUSE mount serialises a directory's creates
    # in the kernel), then a directory per process through the mount.
    "$loom" bench sweep --param dir-stripe --values 1,2,4 --osts 2 --library \
        --loom "$loom" --no-progress \
        --json "$out/sweep-dir-stripe-shared.json" --chart "$out/sweep-dir-stripe-shared" \
        md -F -n 2000 -p 4 -i 3
    "$loom" bench sweep --param dir-stripe --values 1,2,4 --osts 2 \
        --loom "$loom" --no-progress \
        --json "$out/sweep-dir-stripe-unique.json" --chart "$out/sweep-dir-stripe-unique" \
        md -F -u -n 2000 -p 4 -i 3
    # The local ceiling for the same two workloads.
    "$loom" bench compare md -F -n 2000 -p 4 -i 3 --no-progress \
        --json "$out/md-shared-p4-local.json" --chart "$out/md-shared-p4-local" ext4=$ext4 tmpfs=$tmpfs
    "$loom" bench compare md -F -u -n 2000 -p 4 -i 3 --no-progress \
        --json "$out/md-unique-p4-local.json" --chart "$out/md-unique-p4-local" ext4=$ext4 tmpfs=$tmpfs
fi

if [[ $what == ceiling || $what == all ]]; then
    up 2 4
    # The no-op reference keeps entries as long as loomfs keeps leased ones
    # (the mount's --lease-time, 300 s): the same FUSE settings.
    ceil="ext4=$ext4 tmpfs=$tmpfs noop=noop:?attr-timeout=300 loomfs=$mnt/b"
    # mdtest-style empty files, 4 processes, a directory each (-u).
    "$loom" bench compare md -F -u -n 2000 -p 4 -i 3 --no-progress \
        --json "$out/ceiling-unique.json" --chart "$out/ceiling-unique" $ceil
    # The same in one shared directory.
    "$loom" bench compare md -F -n 2000 -p 4 -i 3 --no-progress \
        --json "$out/ceiling-shared.json" --chart "$out/ceiling-shared" $ceil
    # One process.
    "$loom" bench compare md -F -u -n 4000 -p 1 -i 3 --no-progress \
        --json "$out/ceiling-one.json" --chart "$out/ceiling-one" $ceil
    # 4 KiB files written at create and read back, 4 processes.
    "$loom" bench compare md -F -u -n 1000 -p 4 -i 3 -w 4096 -e 4096 --no-progress \
        --json "$out/ceiling-4k.json" --chart "$out/ceiling-4k" $ceil
    # Untar of /usr/include, then rm -rf: wall seconds, interleaved by
    # target for each of 3 rounds.
    tarball=/var/tmp/loom-bench-include.tar
    [ -f "$tarball" ] || tar cf "$tarball" -C /usr include
    noopmnt=/mnt/loom-bench-noop
    mkdir -p "$noopmnt"
    "$loom" mount-noop "$noopmnt" --attr-timeout 300 >/var/tmp/loom-bench-noop.log 2>&1 &
    noop_pid=$!
    for _ in $(seq 1 100); do
        grep -q "^mounted at" /var/tmp/loom-bench-noop.log 2>/dev/null && break
        sleep 0.1
    done
    {
        echo "round target untar_s find_s du_s lslR_s rm_s"
        for round in 1 2 3; do
            for t in ext4=$ext4 tmpfs=$tmpfs noop=$noopmnt loomfs=$mnt/b; do
                name=${t%%=*} dir=${t#*=}/untar
                rm -rf "$dir"; mkdir -p "$dir"; sync
                s=$(date +%s.%N); tar xf "$tarball" -C "$dir"; m=$(date +%s.%N)
                find "$dir" >/dev/null; f=$(date +%s.%N)
                du -s "$dir" >/dev/null; d=$(date +%s.%N)
                ls -lR "$dir" >/dev/null; l=$(date +%s.%N)
                rm -rf "$dir"; e=$(date +%s.%N)
                awk -v r="$round" -v n="$name" -v s="$s" -v m="$m" -v f="$f" -v d="$d" -v l="$l" -v e="$e" \
                    'BEGIN { printf "%s %s %.2f %.2f %.2f %.2f %.2f\n", r, n, m - s, f - m, d - f, l - d, e - l }'
            done
        done
    } | tee "$out/ceiling-untar.txt"
    kill "$noop_pid"; wait "$noop_pid" 2>/dev/null || true
    down
fi

if [[ $what == io500 || $what == all ]]; then
    up 1 4
    # IO500's phases, sized for one machine (not an official run), ext4
    # and loomfs interleaved over 3 iterations.
    "$loom" bench compare io500 -i 3 --no-progress \
        --json "$out/io500.json" --chart "$out/io500" ext4=$ext4 loomfs=$mnt/b
    down
fi
