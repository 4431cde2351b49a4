#!/usr/bin/env bash
# A/B of two loom builds on issue #8/#9's metadata workloads, interleaved
# round by round so the machine's drifts fall on both alike:
#
#   ./scripts/ab.sh OLD_LOOM NEW_LOOM [ROUNDS]   (as root; default 3 rounds)
#
# Each round, for each build in turn: a fresh `loom up --mdts 2 --osts 4`,
# `loom bench compare md -F -u -n 2000 -p 4 -i 1` against ext4, tmpfs and
# the no-op FUSE reference (same run), the same with 4 KiB files (-w 4096
# -e 4096 -n 1000), a streaming write of a new file with dd (1 MiB and
# 16 KiB writes, 256 MiB, fsync'd; loomfs and ext4), then untar of /usr/include, find,
# du -s, ls -lR, a read of every file, a second read of every file (the
# page cache warm) and rm -rf on ext4, tmpfs, the no-op reference and
# the mount.
# Results: /var/tmp/loom-ab/ (JSON per run, untar.txt), and a summary of
# medians printed at the end. Build each binary first, e.g.
#   git worktree add /tmp/old REV && (cd /tmp/old && cargo build --release -p loom)
set -euo pipefail
source "$(dirname "$0")/ab-lib.sh"
ab_init ab.sh 3 "$@"
state=/var/tmp/loom-ab-state mnt=/mnt/loom-ab noopmnt=/mnt/loom-ab-noop
ext4=/var/tmp/loom-bench-ext4 tmpfs=/dev/shm/loom-bench-tmpfs
tarball=/var/tmp/loom-bench-include.tar
out=/var/tmp/loom-ab
[ -f "$tarball" ] || tar cf "$tarball" -C /usr include
rm -rf "$out"; mkdir -p "$out" "$ext4" "$tmpfs" "$noopmnt"
# Stop the clusters, and unmount the no-op reference, however this ends.
trap 'ab_cleanup; umount -l "$noopmnt" 2>/dev/null || true' EXIT
for round in $(seq 1 "$rounds"); do
    for b in old new; do
        loom=${bin[$b]}
        ab_fresh_cluster "$loom" "$state" "$mnt" "$out/up.log"
        mkdir -p "$mnt/b"
        (cd "$out" && "$loom" bench compare md -F -u -n 2000 -p 4 -i 1 --no-progress \
            --json "$out/md-$b-$round.json" \
            ext4=$ext4 tmpfs=$tmpfs noop=noop:?attr-timeout=300 loomfs=$mnt/b >"$out/md-$b-$round.txt")
        mkdir -p "$mnt/b4k"
        (cd "$out" && "$loom" bench compare md -F -u -n 1000 -p 4 -i 1 -w 4096 -e 4096 --no-progress \
            --json "$out/md4k-$b-$round.json" \
            ext4=$ext4 tmpfs=$tmpfs noop=noop:?attr-timeout=300 loomfs=$mnt/b4k >"$out/md4k-$b-$round.txt")
        for t in ext4=$ext4 loomfs=$mnt; do
            for bs in 1M 16k; do
                [ "$bs" = 1M ] && count=256 || count=16384
                f=${t#*=}/dd-$bs; rm -f "$f"
                mbs=$(dd if=/dev/zero of="$f" bs=$bs count=$count conv=fsync 2>&1 | awk '/copied/ { print $(NF-1) * ($NF == "GB/s" ? 1000 : 1) }')
                echo "$round $b ${t%%=*} dd$bs $mbs" | tee -a "$out/dd.txt"
                rm -f "$f"
            done
        done
        "$loom" mount-noop "$noopmnt" --attr-timeout 300 >"$out/noop.log" 2>&1 &
        noop=$!
        ab_wait_for "$out/noop.log"
        for t in ext4=$ext4 tmpfs=$tmpfs noop=$noopmnt loomfs=$mnt/b; do
            name=${t%%=*} dir=${t#*=}/untar
            rm -rf "$dir"; mkdir -p "$dir"; sync
            s=$(date +%s.%N); tar xf "$tarball" -C "$dir"; m=$(date +%s.%N)
            find "$dir" >/dev/null; f=$(date +%s.%N)
            du -s "$dir" >/dev/null; d=$(date +%s.%N)
            ls -lR "$dir" >/dev/null; l=$(date +%s.%N)
            find "$dir" -type f -exec cat {} + >/dev/null; r1=$(date +%s.%N)
            find "$dir" -type f -exec cat {} + >/dev/null; r2=$(date +%s.%N)
            rm -rf "$dir"; e=$(date +%s.%N)
            awk -v r="$round" -v b="$b" -v n="$name" -v s="$s" -v m="$m" -v f="$f" -v d="$d" -v l="$l" -v r1="$r1" -v r2="$r2" -v e="$e" \
                'BEGIN { printf "%s %s %s untar %.2f find %.2f du %.2f lslR %.2f read %.2f reread %.2f rm %.2f\n", r, b, n, m - s, f - m, d - f, l - d, r1 - l, r2 - r1, e - r2 }' \
                | tee -a "$out/untar.txt"
        done
        kill "$noop"; wait "$noop" 2>/dev/null || true
        "$loom" down --dir "$state" >/dev/null
    done
done
python3 - "$out" <<'PY'
import collections, glob, json, statistics as st, sys
out = sys.argv[1]
md = collections.defaultdict(list)
for f in glob.glob(f"{out}/md-*-*.json"):
    b = f.rsplit("/", 1)[1].split("-")[1]
    for s in json.load(open(f))["summaries"]:
        md[(b, s["target"], s["phase"])].append(s["summary"]["median"])
print("md -F -u -n 2000 -p 4, ops/s: median (min-max) of the rounds; loomfs/noop")
for ph in ["File creation", "File stat", "File read", "File removal"]:
    for b in ["old", "new"]:
        cells = []
        for t in ["ext4", "tmpfs", "noop", "loomfs"]:
            v = md[(b, t, ph)]
            cells.append(f"{t} {st.median(v):.0f} ({min(v):.0f}-{max(v):.0f})")
        ratio = st.median(md[(b, "loomfs", ph)]) / st.median(md[(b, "noop", ph)])
        print(f"  {ph:14} {b}: " + ", ".join(cells) + f"; {ratio:.2f}")
md4 = collections.defaultdict(list)
for f in glob.glob(f"{out}/md4k-*-*.json"):
    b = f.rsplit("/", 1)[1].split("-")[1]
    for s in json.load(open(f))["summaries"]:
        md4[(b, s["target"], s["phase"])].append(s["summary"]["median"])
print("md -F -u -n 1000 -p 4 -w 4096 -e 4096, ops/s; loomfs/noop")
for ph in ["File creation", "File read"]:
    for b in ["old", "new"]:
        cells = [f"{t} {st.median(md4[(b, t, ph)]):.0f}" for t in ["ext4", "tmpfs", "noop", "loomfs"]]
        ratio = st.median(md4[(b, "loomfs", ph)]) / st.median(md4[(b, "noop", ph)])
        print(f"  {ph:14} {b}: " + ", ".join(cells) + f"; {ratio:.2f}")
dd = collections.defaultdict(list)
for line in open(f"{out}/dd.txt"):
    r, b, t, what, v = line.split()
    dd[(b, t, what)].append(float(v))
print("dd of a new file, 256 MiB, conv=fsync, MB/s: median (min-max)")
for what in ["dd1M", "dd16k"]:
    for b in ["old", "new"]:
        cells = [f"{t} {st.median(dd[(b, t, what)]):.0f} ({min(dd[(b, t, what)]):.0f}-{max(dd[(b, t, what)]):.0f})" for t in ["ext4", "loomfs"]]
        print(f"  {what:6} {b}: " + ", ".join(cells))
tt = collections.defaultdict(list)
for line in open(f"{out}/untar.txt"):
    w = line.split()
    for k in range(3, len(w), 2):
        tt[(w[1], w[2], w[k])].append(float(w[k + 1]))
print("seconds: median (min-max); loomfs/noop, loomfs/ext4")
for m in ["untar", "find", "du", "lslR", "read", "reread", "rm"]:
    for b in ["old", "new"]:
        cells = [f"{n} {st.median(tt[(b, n, m)]):.2f} ({min(tt[(b, n, m)]):.2f}-{max(tt[(b, n, m)]):.2f})" for n in ["ext4", "tmpfs", "noop", "loomfs"]]
        lo = st.median(tt[(b, "loomfs", m)])
        ratios = [lo / max(st.median(tt[(b, n, m)]), 0.005) for n in ["noop", "ext4"]]
        print(f"  {m:6} {b}: " + ", ".join(cells) + f"; {ratios[0]:.1f}x, {ratios[1]:.1f}x")
PY
