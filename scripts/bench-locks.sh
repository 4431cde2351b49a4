#!/usr/bin/env bash
# File locks and appends across mounts (issue #29's benchmarks):
#
#   ./scripts/bench-locks.sh LOOM_BINARY [ROUNDS] [SECONDS]   (as root; 3 rounds of 5 s)
#
# A fresh `loom up --mdts 1 --osts 2` mounted twice. For each target, in
# turn within each round (ext4, tmpfs, loomfs; loomfs's two processes on
# its two mounts, a local target's two on the same directory):
#   lock1   one process: F_SETLK a write lock on byte 0, then unlock it,
#           as fast as it can: lock+unlock pairs per second
#   lock2   two processes, each F_SETLKW on byte 0 then unlock, the same
#           byte: pairs per second of both together (every lock waits for
#           the other's unlock about half the time)
#   append2 two processes, each appending 64-byte records through an
#           O_APPEND descriptor it keeps: appends per second of both
# Each runs SECONDS. Medians (and min-max) over the rounds are printed,
# with each loomfs figure's ratio to tmpfs. Raw lines go to
# /var/tmp/loom-locks/results.txt.
set -euo pipefail
[ $# -ge 1 ] && [ -x "$1" ] || { echo "usage: $0 LOOM_BINARY [ROUNDS] [SECONDS]" >&2; exit 2; }
loom=$(realpath "$1") rounds=${2:-3} secs=${3:-5}
[[ $rounds =~ ^[1-9][0-9]*$ && $secs =~ ^[1-9][0-9]*$ ]] || { echo "ROUNDS and SECONDS must be positive numbers" >&2; exit 2; }
out=/var/tmp/loom-locks state=/var/tmp/loom-locks-state
mnt1=/mnt/loom-locks1 mnt2=/mnt/loom-locks2
ext4=/var/tmp/loom-locks-ext4 tmpfs=/dev/shm/loom-locks-tmpfs
rm -rf "$out" "$ext4" "$tmpfs"; mkdir -p "$out" "$ext4" "$tmpfs" "$mnt1" "$mnt2"

cleanup() {
    fusermount3 -uz "$mnt2" 2>/dev/null || true
    [ -n "${m2pid:-}" ] && kill "$m2pid" 2>/dev/null || true
    "$loom" down --dir "$state" >/dev/null 2>&1 || true
    [ -n "${uppid:-}" ] && wait "$uppid" 2>/dev/null || true
}
trap cleanup EXIT

"$loom" down --dir "$state" >/dev/null 2>&1 || true
rm -rf "$state"
"$loom" up --mdts 1 --osts 2 --dir "$state" --mount "$mnt1" >"$out/up.log" 2>&1 &
uppid=$!
for _ in $(seq 1 600); do grep -q "mounted at" "$out/up.log" && break; sleep 0.1; done
grep -q "mounted at" "$out/up.log" || { cat "$out/up.log" >&2; exit 1; }
mgs=127.0.0.1:$(sed -n 's/^ *mgs *= *\([0-9]*\).*/\1/p' "$state/cluster.toml" | head -1)
"$loom" mount "$mgs:/loom" "$mnt2" --key-file "$state/client.key" --foreground >"$out/m2.log" 2>&1 &
m2pid=$!
for _ in $(seq 1 600); do grep -q "mounted at" "$out/m2.log" && break; sleep 0.1; done
grep -q "mounted at" "$out/m2.log" || { cat "$out/m2.log" >&2; exit 1; }
mkdir -p "$mnt1/locks"

worker=$(cat <<'EOF'
import fcntl, os, struct, sys, time
mode, path, secs = sys.argv[1], sys.argv[2], float(sys.argv[3])
fl = lambda t: struct.pack("hhqqi4x", t, 0, 0, 1, 0)
n = 0
if mode == "append":
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    rec = b"r" * 63 + b"\n"
else:
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    cmd = fcntl.F_SETLKW if mode == "lockw" else fcntl.F_SETLK
sys.stdout.write("ready\n"); sys.stdout.flush()
sys.stdin.readline()
end = time.monotonic() + secs
while time.monotonic() < end:
    if mode == "append":
        os.write(fd, rec)
    else:
        fcntl.fcntl(fd, cmd, fl(fcntl.F_WRLCK))
        fcntl.fcntl(fd, fcntl.F_SETLK, fl(fcntl.F_UNLCK))
    n += 1
print(n / secs)
EOF
)

# run NAME DIR1 DIR2 MODE PROCS: both processes start together.
run() {
    local name=$1 d1=$2 d2=$3 mode=$4 procs=$5 i pids=() fifo
    rm -f "$d1/f-$name"
    fifo=$(mktemp -u); mkfifo "$fifo"
    for i in $(seq 1 "$procs"); do
        local d=$d1; [ "$i" -eq 2 ] && d=$d2
        python3 -c "$worker" "$mode" "$d/f-$name" "$secs" <"$fifo" >"$out/w$i" &
        pids+=($!)
    done
    exec 9>"$fifo"
    for i in $(seq 1 "$procs"); do
        for _ in $(seq 1 200); do grep -q ready "$out/w$i" 2>/dev/null && break; sleep 0.05; done
    done
    for i in $(seq 1 "$procs"); do echo go >&9; done
    exec 9>&-
    wait "${pids[@]}"
    rm -f "$fifo"
    local total=0 v
    for i in $(seq 1 "$procs"); do
        v=$(tail -1 "$out/w$i"); total=$(python3 -c "print($total + $v)")
    done
    echo "$total"
}

for round in $(seq 1 "$rounds"); do
    for t in ext4 tmpfs loomfs; do
        case $t in
            ext4) d1=$ext4 d2=$ext4 ;;
            tmpfs) d1=$tmpfs d2=$tmpfs ;;
            loomfs) d1=$mnt1/locks d2=$mnt2/locks ;;
        esac
        for w in lock1:lock:1 lock2:lockw:2 append2:append:2; do
            IFS=: read -r name mode procs <<<"$w"
            v=$(run "$name" "$d1" "$d2" "$mode" "$procs")
            echo "$round $t $name $v" | tee -a "$out/results.txt" >&2
        done
    done
done

python3 - "$out/results.txt" <<'EOF'
import statistics, sys
rows = [l.split() for l in open(sys.argv[1])]
vals = {}
for _, t, name, v in rows:
    vals.setdefault((name, t), []).append(float(v))
print("| workload | ext4 | tmpfs | loomfs | loomfs/tmpfs |")
print("| --- | ---: | ---: | ---: | ---: |")
for name in ["lock1", "lock2", "append2"]:
    cell = {}
    for t in ["ext4", "tmpfs", "loomfs"]:
        v = vals.get((name, t), [0])
        cell[t] = (statistics.median(v), min(v), max(v))
    fmt = lambda c: "%s (%s-%s)" % tuple(format(round(x), ",") for x in c)
    ratio = cell["loomfs"][0] / cell["tmpfs"][0] if cell["tmpfs"][0] else 0
    print("| %s | %s | %s | %s | %.3f |" % (name, fmt(cell["ext4"]), fmt(cell["tmpfs"]), fmt(cell["loomfs"]), ratio))
EOF
