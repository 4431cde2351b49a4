#!/usr/bin/env bash
# How long a writer waits when the primary of the OST it writes to, or
# of the MDT, is killed (issue #33): one `loom up --mdts 1 --osts 1
# --replicas 2`; each kill, a writer works again and again (ost: appends
# 64 KiB to a file and fsyncs; mdt: creates a file, writes 4 KiB, fsyncs
# and closes it); the server of the target's primary is killed with
# SIGKILL, the longest gap between two acknowledged steps around it is
# the pause; then the killed server is started again and waited for
# until it is in sync.
#
#   ./scripts/failover-pause.sh LOOM [KILLS] [ost|mdt]   (as root; default 20 ost)
#
# Results: /var/tmp/loom-failover/pauses.txt, a line per kill, then the
# median and the largest.
set -euo pipefail
[ $# -ge 1 ] && [ -x "$1" ] || { echo "usage: failover-pause.sh LOOM [KILLS]" >&2; exit 2; }
loom=$(realpath "$1") kills=${2:-20} kind=${3:-ost}
[[ $kills =~ ^[1-9][0-9]*$ ]] || { echo "failover-pause.sh: KILLS must be a positive number" >&2; exit 2; }
case $kind in
    ost) target=OST0000 ;;
    mdt) target=MDT0000 ;;
    *) echo "failover-pause.sh: the target is ost or mdt, not '$kind'" >&2; exit 2 ;;
esac
state=/var/tmp/loom-failover-state mnt=/mnt/loom-failover out=/var/tmp/loom-failover
trap '"$loom" down --dir "$state" >/dev/null 2>&1 || true; pkill -f "$state/nodes/" || true' EXIT
rm -rf "$out" "$state"; mkdir -p "$out"
"$loom" up --mdts 1 --osts 1 --replicas 2 --dir "$state" --mount "$mnt" >"$out/up.log" 2>&1 &
for _ in $(seq 1 600); do grep -q "^mounted at" "$out/up.log" 2>/dev/null && break; sleep 0.1; done
# The row of the target's replica R in `loom target status`: "role state".
row() { "$loom" target status "$mnt" | awk -v t="$target" -v r="$1" '$1 == t && $2 == r { print $4, $5 }'; }
wait_row() { # REPLICA "ROLE STATE"
    for _ in $(seq 1 1200); do [ "$(row "$1")" = "$2" ] && return 0; sleep 0.1; done
    echo "$target replica $1 is not '$2' after 120 s:" >&2; "$loom" target status "$mnt" >&2; return 1
}
wait_row 1 "secondary in-sync"
for k in $(seq 1 "$kills"); do
    primary=$("$loom" target status "$mnt" | awk -v t="$target" '$1 == t && $4 == "primary" { print $2 }')
    other=$((1 - primary))
    name=${kind}0; [ "$primary" = 1 ] && name=${kind}0r1
    mkdir -p "$mnt/d"
    python3 - "$mnt/f" "$out/ops-$k.txt" "$kind" <<'PY' &
import os, sys, time
path, kind = sys.argv[1], sys.argv[3]
log = open(sys.argv[2], "w")
fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
block = os.urandom(65536)
end = time.monotonic() + 15
i = 0
while time.monotonic() < end:
    if kind == "ost":
        os.write(fd, block)
        os.fsync(fd)
    else:
        f = os.open(os.path.join(os.path.dirname(path), "d", "f%d" % i), os.O_WRONLY | os.O_CREAT, 0o644)
        os.write(f, block[:4096])
        os.fsync(f)
        os.close(f)
        i += 1
    print("%.4f" % time.monotonic(), file=log, flush=True)
PY
    writer=$!
    sleep 2
    # By its config: a server started again here has no pid file.
    kill -9 "$(pgrep -f -- "--config $state/nodes/$name.toml" | head -1)"
    killed=$(python3 -c 'import time; print("%.4f" % time.monotonic())')
    wait "$writer"
    python3 - "$out/ops-$k.txt" "$killed" "$k" <<'PY' | tee -a "$out/pauses.txt"
import sys
t = [float(x) for x in open(sys.argv[1])]
killed = float(sys.argv[2])
before = max([x for x in t if x <= killed], default=killed)
after = min([x for x in t if x > killed], default=float("nan"))
print("kill %s: %.2f s" % (sys.argv[3], after - before))
PY
    wait_row "$other" "primary in-sync"
    (setsid "$loom" server --config "$state/nodes/$name.toml" >>"$state/logs/$name.log" 2>&1 &)
    wait_row "$primary" "secondary in-sync"
    rm -rf "$mnt/f" "$mnt/d"
done
python3 - "$out/pauses.txt" <<'PY'
import statistics, sys
p = [float(l.split()[2]) for l in open(sys.argv[1])]
print("pauses over %d kills: median %.2f s, largest %.2f s, smallest %.2f s" % (len(p), statistics.median(p), max(p), min(p)))
PY
