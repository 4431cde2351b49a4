#!/usr/bin/env bash
# Metadata write-back (issue #32) against the FUSE ceiling: a fresh
# `loom up --mdts 2 --osts 4` mounted twice, plainly and with
# --write-back, beside the no-op FUSE reference (`loom mount-noop`, with
# loomfs's lease time as its entry timeout) and, if MOOSEFS names a
# mounted MooseFS directory (scripts/moosefs-up.sh), MooseFS. Interleaved
# per round:
#   - mdtest-style empty files, 4 processes, a directory each
#     (`loom bench compare md -F -u -n 2000 -p 4`);
#   - the same with 4 KiB written and read back (-w 4096 -e 4096 -n 1000),
#     then again with loomfs's directories keeping 64 KiB on the MDT;
#   - untar of /usr/include, then rm -rf, wall seconds, with the loomfs
#     servers' CPU seconds per untarred file (all server processes,
#     /proc/PID/stat utime + stime);
#   - 1,000 files made on the write-back mount, listed at once by the
#     plain one (its first access recalls the lease): how long it took.
# Usage: scripts/bench-write-back.sh LOOM [ROUNDS] [OUT]
set -euo pipefail
loom=$(realpath -- "$1")
rounds=${2:-3}
out=${3:-/var/tmp/loom-bench-wb}
state=/var/tmp/loom-bench-wb-state
plain=/mnt/loom-bench-plain
wb=/mnt/loom-bench-wb
noopmnt=/mnt/loom-bench-noop
tarball=/var/tmp/loom-bench-include.tar
mkdir -p "$out" "$plain" "$wb" "$noopmnt"
cd "$out" # the charts go next to the results
[ -f "$tarball" ] || tar cf "$tarball" -C /usr include

cleanup() {
    for m in "$wb" "$plain" "$noopmnt"; do fusermount3 -uz "$m" 2>/dev/null || true; done
    "$loom" down --dir "$state" >/dev/null 2>&1 || true
}
trap cleanup EXIT
cleanup
rm -rf "$state"
"$loom" up --mdts 2 --osts 4 --dir "$state" --no-mount >"$out/up.log" 2>&1 &
for _ in $(seq 1 300); do
    grep -q "is up" "$out/up.log" 2>/dev/null && break
    sleep 0.1
done
mgs=$(grep -o "MGS at [0-9.:]*" "$out/up.log" | cut -d' ' -f3)
"$loom" mount "$mgs:/loom" "$plain" --key-file "$state/client.key" --log "$out/plain.log" >/dev/null
"$loom" mount "$mgs:/loom" "$wb" --key-file "$state/client.key" --write-back --log "$out/wb.log" >/dev/null
"$loom" mount-noop "$noopmnt" --attr-timeout 300 >"$out/noop.log" 2>&1 &
noop_pid=$!
for _ in $(seq 1 100); do
    grep -q "^mounted at" "$out/noop.log" 2>/dev/null && break
    sleep 0.1
done
mkdir -p "$plain/p" "$wb/w"
targets="noop=$noopmnt loomfs=$plain/p loomfs-wb=$wb/w${MOOSEFS:+ moosefs=$MOOSEFS}"

"$loom" bench compare md -F -u -n 2000 -p 4 -i "$rounds" --no-progress \
    --json "$out/md-empty.json" $targets | tee "$out/md-empty.txt"
"$loom" bench compare md -F -u -n 1000 -p 4 -i "$rounds" -w 4096 -e 4096 --no-progress \
    --json "$out/md-4k.json" $targets | tee "$out/md-4k.txt"

# The same with the first 64 KiB of each file on the MDT (Data-on-MDT,
# `loom setstripe -E 64K -L mdt -E -1`) under both loomfs mounts.
mkdir -p "$plain/pdom" "$wb/wdom"
for d in "$plain/pdom" "$wb/wdom"; do
    "$loom" setstripe -E 64K -L mdt -E -1 "$d" >/dev/null
done
"$loom" bench compare md -F -u -n 1000 -p 4 -i "$rounds" -w 4096 -e 4096 --no-progress \
    --json "$out/md-4k-dom.json" noop=$noopmnt loomfs-dom=$plain/pdom loomfs-wb-dom=$wb/wdom \
    ${MOOSEFS:+moosefs=$MOOSEFS} | tee "$out/md-4k-dom.txt"

server_cpu() { # CPU seconds of every loom server process so far
    local total=0
    for f in "$state"/pids/*.pid; do
        local pid
        pid=$(cat "$f")
        # Fields 14 and 15 of /proc/PID/stat, after the command's ")".
        set -- $(sed 's/.*) //' "/proc/$pid/stat")
        total=$((total + ${12} + ${13}))
    done
    echo "$total"
}
# Until the servers are idle (at most one tick of CPU in 200 ms, 10 s at
# most): what the previous target's rm -rf left them to do (objects to
# destroy) is not counted in the next untar's CPU.
quiet() {
    local a b
    for _ in $(seq 1 50); do
        a=$(server_cpu)
        sleep 0.2
        b=$(server_cpu)
        [ $((b - a)) -le 1 ] && return
    done
}
files=$(tar tf "$tarball" | wc -l)
{
    echo "round target untar_s rm_s server_cpu_ms_per_file"
    for round in $(seq 1 "$rounds"); do
        for t in $targets; do
            name=${t%%=*} dir=${t#*=}/untar
            rm -rf "$dir"; mkdir -p "$dir"; sync; quiet
            c0=$(server_cpu)
            s=$(date +%s.%N); tar xf "$tarball" -C "$dir"; m=$(date +%s.%N)
            # Everything sent and committed before the CPU is read (a
            # write-back mount sends the last changes after tar ends).
            python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd)' "$dir"
            c1=$(server_cpu)
            rm -rf "$dir"; e=$(date +%s.%N)
            hz=$(getconf CLK_TCK)
            awk -v r="$round" -v n="$name" -v s="$s" -v m="$m" -v e="$e" \
                -v c="$((c1 - c0))" -v hz="$hz" -v f="$files" -v loomfs="${name#loomfs}" \
                'BEGIN { cpu = (n ~ /^loomfs/) ? sprintf("%.3f", c / hz * 1000 / f) : "-";
                         printf "%s %s %.2f %.2f %s\n", r, n, m - s, e - m, cpu }'
        done
    done
} | tee "$out/untar.txt"
python3 - "$out/untar.txt" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1]).read().splitlines()[1:]]
by = {}
for r, n, u, rm, cpu in rows:
    by.setdefault(n, []).append((float(u), float(rm), cpu))
noop = by.get("noop")
for n, v in by.items():
    u = statistics.median(x[0] for x in v)
    rm = statistics.median(x[1] for x in v)
    cpus = [float(x[2]) for x in v if x[2] != "-"]
    cpu = f", server CPU {statistics.median(cpus):.3f} ms/file" if cpus else ""
    rel = ""
    if noop:
        rel = f" ({u / statistics.median(x[0] for x in noop):.2f}x and {rm / statistics.median(x[1] for x in noop):.2f}x the no-op)"
    print(f"{n}: untar {u:.2f} s, rm -rf {rm:.2f} s{rel}{cpu} (median of {len(v)})")
EOF
# Visibility: files a write-back mount made (1,000, not sent yet) seen by
# the other mount at its first access, which recalls the directory's
# lease and waits for them to be sent.
{
    echo "round first_access_ms listed"
    for round in $(seq 1 "$rounds"); do
        mkdir "$wb/w/vis$round"
        python3 -c 'import os, sys
for i in range(1000):
    open(os.path.join(sys.argv[1], f"f{i}"), "w").close()' "$wb/w/vis$round"
        s=$(date +%s.%N)
        n=$(ls "$plain/w/vis$round" | wc -l)
        e=$(date +%s.%N)
        awk -v r="$round" -v s="$s" -v e="$e" -v n="$n" 'BEGIN { printf "%s %.1f %s\n", r, (e - s) * 1000, n }'
    done
} | tee "$out/visibility.txt"
kill "$noop_pid"; wait "$noop_pid" 2>/dev/null || true
