#!/usr/bin/env bash
# The policy engine (issue #31, point 5), on one fresh `loom up --mdts 2
# --osts 4` on this machine:
#
#   ./scripts/bench-policy.sh LOOM [ROUNDS] [FILES]   (as root; 3, 100000)
#
# 1. Catalog scan rate: a tree of FILES small files in 100 directories
#    dealt over both MDTs, and the same tree on a tmpfs. Round by round,
#    interleaved: `loom policy scan` into an SQLite catalog and into a
#    PostgreSQL one (inodes/s as the tool prints it), and, as references,
#    GNU `find -printf` of the same attributes (inode, size, owner, group,
#    times) through the mount with the kernel's caches dropped, and on the
#    tmpfs copy.
# 2. Changelog-follow lag under an mdtest load: `loom policy follow` runs
#    against the SQLite catalog while `loom bench md` creates, stats and
#    removes files on the mount (2 processes); every 0.5 s a marker file
#    is made and the time until its name is in the catalog is measured.
#    Lag figures per marker, with the load's create rate.
# Prints one line per figure; medians at the end. Builds nothing.
set -euo pipefail
[ $# -ge 1 ] || { echo "usage: bench-policy.sh LOOM [ROUNDS] [FILES]" >&2; exit 2; }
loom=$(realpath "$1")
rounds=${2:-3}
files=${3:-100000}
base=/var/tmp/loom-bench-pol out=/var/tmp/loom-bench-pol-out mnt=/mnt/loom-pol tmp=/mnt/loom-pol-tmpfs
db=loombench_$$
rm -rf "$out"; mkdir -p "$out" "$mnt" "$tmp"
psql_() { runuser -u postgres -- psql -q -v ON_ERROR_STOP=1 -c "$1"; }
down() {
    [ -n "${follower:-}" ] && kill "$follower" 2>/dev/null || true
    "$loom" down --dir "$base" >/dev/null 2>&1 || true
    umount "$tmp" 2>/dev/null || true
    psql_ "DROP DATABASE IF EXISTS $db WITH (FORCE)" 2>/dev/null || true
}
trap down EXIT
rm -rf "$base"
pg_lsclusters -h | while read -r ver name _ state _; do
    [ "$state" = online ] || pg_ctlcluster "$ver" "$name" start
done
psql_ "DO \$\$ BEGIN IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'loomtest') THEN CREATE ROLE loomtest LOGIN PASSWORD 'loomtest'; END IF; END \$\$;"
"$loom" up --mdts 2 --osts 4 --dir "$base" --mount "$mnt" >"$out/up.log" 2>&1 &
for _ in $(seq 1 300); do grep -q "^mounted at" "$out/up.log" && break; sleep 0.1; done
grep -q "^mounted at" "$out/up.log" || { cat "$out/up.log"; exit 1; }
mount -t tmpfs -o size=4g tmpfs "$tmp"
now() { date +%s.%N; }
fig() { echo "$1 $2" | tee -a "$out/figures"; }

# 1. The tree, then the scans.
mkdir "$mnt/t" "$tmp/t"
for i in $(seq 0 99); do "$loom" mkdir -i $((i % 2)) "$mnt/t/d$i"; mkdir "$tmp/t/d$i"; done
make_tree() { # TOP
    python3 - "$1" "$files" <<'EOF'
import os, sys
top, n = sys.argv[1], int(sys.argv[2])
for k in range(n):
    p = os.path.join(top, "d%d" % (k % 100), "f%07d" % k)
    fd = os.open(p, os.O_WRONLY | os.O_CREAT, 0o644)
    if k % 4 == 0:
        os.write(fd, b"x" * (k % 5000))
    os.close(fd)
EOF
}
make_tree "$mnt/t"
make_tree "$tmp/t"
sqlite="$out/cat.sqlite"
rate() { sed -n 's/.*(\([0-9.]*\) inodes\/s).*/\1/p'; }
for r in $(seq 1 "$rounds"); do
    psql_ "DROP DATABASE IF EXISTS $db WITH (FORCE)"
    psql_ "CREATE DATABASE $db OWNER loomtest"
    rm -f "$sqlite"*
    fig scan_sqlite_inodes_per_s "$("$loom" policy scan "$mnt" -q --catalog "$sqlite" | rate)"
    "$loom" policy forget "$mnt" --catalog "$sqlite" >/dev/null
    fig scan_postgresql_inodes_per_s "$("$loom" policy scan "$mnt" -q --catalog "postgres://loomtest:loomtest@127.0.0.1/$db" | rate)"
    "$loom" policy forget "$mnt" --catalog "postgres://loomtest:loomtest@127.0.0.1/$db" >/dev/null
    sync; echo 3 > /proc/sys/vm/drop_caches
    t0=$(now); n=$(find "$mnt/t" -printf '%i %s %U %G %A@ %T@ %C@\n' | wc -l); t1=$(now)
    fig find_printf_mount_cold_inodes_per_s "$(echo "$n / ($t1 - $t0)" | bc)"
    t0=$(now); n=$(find "$tmp/t" -printf '%i %s %U %G %A@ %T@ %C@\n' | wc -l); t1=$(now)
    fig find_printf_tmpfs_inodes_per_s "$(echo "$n / ($t1 - $t0)" | bc)"
done

# 2. Follow lag under an mdtest load.
"$loom" policy scan "$mnt" -q --catalog "$sqlite" >/dev/null
"$loom" policy follow "$mnt" -q --catalog "$sqlite" >"$out/follow.log" 2>&1 &
follower=$!
mkdir "$mnt/markers"
"$loom" bench md -n 20000 -F -p 2 -u --no-progress --name md "$mnt" >"$out/md.txt" 2>&1 &
load=$!
python3 - "$mnt/markers" "$sqlite" "$load" >"$out/lags" <<'EOF'
import os, sqlite3, sys, time
d, cat, load = sys.argv[1], sys.argv[2], int(sys.argv[3])
db = sqlite3.connect(cat, timeout=30)
i = 0
def alive():
    try:
        os.kill(load, 0)
        return True
    except OSError:
        return False
while alive():
    name = "m%d" % i
    t0 = time.time()
    open(os.path.join(d, name), "w").close()
    while not db.execute("SELECT 1 FROM names WHERE name = ?", (name.encode(),)).fetchone():
        time.sleep(0.02)
    print("%.3f" % (time.time() - t0), flush=True)
    i += 1
    time.sleep(max(0.0, 0.5 - (time.time() - t0)))
EOF
wait "$load" || true
kill "$follower"; wait "$follower" 2>/dev/null || true; follower=
cat "$out/md.txt" | grep -Ei "create|stat|remove" | head -5 | sed 's/^/md: /'
sort -n "$out/lags" | awk '{a[NR]=$1} END {printf "follow_lag_s markers %d median %.3f p95 %.3f max %.3f\n", NR, a[int((NR+1)/2)], a[int(NR*0.95+0.5)], a[NR]}' | tee -a "$out/figures"

echo "== medians over $rounds rounds"
for k in $(cut -d' ' -f1 "$out/figures" | grep -v follow_lag | sort -u); do
    grep "^$k " "$out/figures" | cut -d' ' -f2 | sort -n | awk -v k="$k" '{a[NR]=$1} END {print k, a[int((NR+1)/2)]}'
done
