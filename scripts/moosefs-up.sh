#!/usr/bin/env bash
# Brings up a throwaway MooseFS file system on this one machine and mounts it,
# as a comparison target for `loom bench compare` (issue #32 asks loomfs to be
# ahead of "Debian's moosefs packages: a master, two chunkservers, goal 1,
# trash time 0").
#
#   scripts/moosefs-up.sh MOUNTPOINT [STATE_DIR]
#
# What it does:
#   - installs Debian's moosefs-master, moosefs-chunkserver and moosefs-client
#     (3.0.117 on bookworm) if missing, and moosefs-cli when the archive has
#     it (used only to check that the master sees both chunkservers);
#   - writes, in STATE_DIR (default /var/tmp/moosefs), a master and two
#     chunkserver configs, their data dirs, the exports file and the chunk
#     directories; the packages' /etc/mfs is not used, only the empty metadata
#     template /var/lib/mfs/metadata.mfs.empty is copied;
#   - starts mfsmaster and the two mfschunkservers (as root), waits (60 s at
#     most) until the master has both chunkservers, mounts the file system on
#     MOUNTPOINT and sets goal 1 and trash time 0 on it, recursively.
# Ends with the line "moosefs mounted at MOUNTPOINT". If MOUNTPOINT is already
# a MooseFS mount, says so and exits 0. scripts/moosefs-down.sh undoes it all.
#
# Network: MooseFS runs in a network namespace of its own, MFS_NETNS
# (default loom-bench-mfs), created here and deleted by moosefs-down.sh: the
# master, the chunkservers and mfsmount's connections live there, and only the
# FUSE mount is in the machine's mount table. Inside, the master's client and
# metalogger ports listen on 127.0.0.1; master <-> chunkserver traffic cannot
# (both mfschunkserver and mfsmaster refuse 127.0.0.0/8 for that link: "you
# cannot use localhost for communication between chunkserver and master"), so
# it uses 198.18.0.1 (RFC 2544's benchmarking range), put on the namespace's
# own loopback device. No packet can leave the namespace: it has no other
# device.
# Ports, from MFS_PORT_BASE (default 9419, MooseFS's own defaults):
#   BASE    master, metaloggers         127.0.0.1
#   BASE+1  master, chunkservers        198.18.0.1
#   BASE+2  master, clients/mfscli      127.0.0.1
#   BASE+3  chunkserver 1               198.18.0.1
#   BASE+4  chunkserver 2               198.18.0.1
# Extra mfsmount options may be given in MFSMOUNT_OPTS, e.g.
# MFSMOUNT_OPTS="-o mfsfsyncmintime=86400" (by default mfsmount fsyncs every
# file on its last close).
# The daemons log to syslog (when there is one); their start-up messages are
# in STATE_DIR/*.log.
set -euo pipefail

prog=moosefs-up
# shellcheck source=scripts/moosefs-args.sh
source "$(dirname -- "$0")/moosefs-args.sh"
[ "$mnt" != "$state" ] || die "MOUNTPOINT and STATE_DIR must differ"
case $mnt/ in "$state"/*) die "MOUNTPOINT must not be inside STATE_DIR ($state is removed by moosefs-down.sh)";; esac

base=${MFS_PORT_BASE:-9419}
[[ $base =~ ^[1-9][0-9]*$ ]] && [ "$base" -le 65530 ] || die "MFS_PORT_BASE must be a port number, not '$base'"
ml_port=$base cs_port=$((base + 1)) cl_port=$((base + 2))
csserv_port=([1]=$((base + 3)) [2]=$((base + 4)))
host=127.0.0.1
cshost=198.18.0.1
ns=${MFS_NETNS:-loom-bench-mfs}
[[ $ns =~ ^[A-Za-z0-9_.-]+$ ]] || die "MFS_NETNS must be a plain name, not '$ns'"
in_ns() { ip netns exec "$ns" "$@"; }

# Already mounted? Then there is nothing to do.
if mountpoint -q -- "$mnt" 2>/dev/null; then
    fstype=$(findmnt -n -o FSTYPE --mountpoint "$mnt" 2>/dev/null || true)
    source=$(findmnt -n -o SOURCE --mountpoint "$mnt" 2>/dev/null || true)
    if [[ $fstype == *mfs* || $fstype == *moosefs* || ${source,,} == mfs#* ]]; then
        echo "$prog: $mnt is already a MooseFS mount; nothing to do"
        echo "moosefs mounted at $mnt"
        exit 0
    fi
    die "$mnt is already a mount point of type '${fstype:-unknown}', not MooseFS"
fi

# --- packages --------------------------------------------------------------
installed() { dpkg-query -W -f='${Status}\n' "$1" 2>/dev/null | grep -q '^install ok installed$'; }
need=()
for p in moosefs-master moosefs-chunkserver moosefs-client; do
    installed "$p" || need+=("$p")
done
if ! installed moosefs-cli && apt-cache show moosefs-cli >/dev/null 2>&1; then
    need+=(moosefs-cli)
fi
if [ ${#need[@]} -gt 0 ]; then
    echo "$prog: installing ${need[*]}"
    # The packages' maintainer scripts only register the init scripts (and
    # the mfs user); they start no daemon.
    DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -q "${need[@]}" >&2 ||
        die "apt-get install ${need[*]} failed (was apt-get update run?)"
fi
for b in mfsmaster mfschunkserver mfsmount mfssetgoal mfssettrashtime ip ss nsenter; do
    command -v "$b" >/dev/null || die "$b not found (after installing the moosefs packages)"
done
template=/var/lib/mfs/metadata.mfs.empty
[ -f "$template" ] || die "$template (the empty metadata, from moosefs-master) is missing"

# --- refuse to clobber a running instance -----------------------------------
for c in "$state"/master/mfsmaster.cfg "$state"/cs1/mfschunkserver.cfg "$state"/cs2/mfschunkserver.cfg; do
    if [ -f "$c" ] && pgrep -f -- "-c $c( |\$)" >/dev/null; then
        die "daemons from an earlier run still use $state; run scripts/moosefs-down.sh $mnt $state first"
    fi
done
# --- state dir -----------------------------------------------------------------
rm -rf -- "$state"
mkdir -p -- "$state"/master/data "$state"/cs1/data "$state"/cs1/chunks "$state"/cs2/data "$state"/cs2/chunks

avail_mib=$(df -Pm -- "$state" | awk 'NR == 2 { print $4 }')
# Each chunkserver leaves HDD_LEAVE_SPACE_DEFAULT (256MiB) unused on its
# disk, and both chunk dirs are on the same file system here.
[ "${avail_mib:-0}" -ge 1024 ] || die "only ${avail_mib:-?} MiB free under $state; want at least 1 GiB for the chunks"

# --- the network namespace -------------------------------------------------------
if ip netns list | grep -qw -- "$ns"; then
    in_ns ss -Hltn | grep -q . && die "network namespace $ns is in use (another instance? run scripts/moosefs-down.sh)"
else
    echo "$prog: creating network namespace $ns"
    ip netns add "$ns" || die "could not create network namespace $ns"
fi
echo "$ns" >"$state"/netns
in_ns ip link set lo up
in_ns ip -4 -o addr show dev lo | grep -q "inet $cshost/32 " || in_ns ip addr add "$cshost/32" dev lo
links=$(in_ns ip -o link show | grep -vc ': lo:' || true)
[ "$links" -eq 0 ] || die "network namespace $ns has devices besides lo; not starting"

# --- configs -------------------------------------------------------------------
cp -- "$template" "$state"/master/data/metadata.mfs

cat >"$state"/master/mfsmaster.cfg <<EOF
# Written by scripts/moosefs-up.sh: a throwaway single-machine master.
WORKING_USER = root
WORKING_GROUP = root
SYSLOG_IDENT = mfsmaster-loombench
DATA_PATH = $state/master/data
EXPORTS_FILENAME = $state/master/mfsexports.cfg
TOPOLOGY_FILENAME = $state/master/mfstopology.cfg
MATOML_LISTEN_HOST = $host
MATOML_LISTEN_PORT = $ml_port
# MooseFS refuses chunkservers that connect from 127.0.0.0/8.
MATOCS_LISTEN_HOST = $cshost
MATOCS_LISTEN_PORT = $cs_port
MATOCL_LISTEN_HOST = $host
MATOCL_LISTEN_PORT = $cl_port
EOF
# Local clients may mount the whole tree read-write and stay root
# (maproot=0); "." is the meta file system (trash).
cat >"$state"/master/mfsexports.cfg <<EOF
$host / rw,alldirs,maproot=0,admin
$host . rw
EOF
: >"$state"/master/mfstopology.cfg

for i in 1 2; do
    cat >"$state"/cs$i/mfschunkserver.cfg <<EOF
# Written by scripts/moosefs-up.sh: chunkserver $i of 2.
WORKING_USER = root
WORKING_GROUP = root
SYSLOG_IDENT = mfschunkserver$i-loombench
DATA_PATH = $state/cs$i/data
HDD_CONF_FILENAME = $state/cs$i/mfshdd.cfg
HDD_LEAVE_SPACE_DEFAULT = 256MiB
BIND_HOST = $cshost
MASTER_HOST = $cshost
MASTER_PORT = $cs_port
CSSERV_LISTEN_HOST = $cshost
CSSERV_LISTEN_PORT = ${csserv_port[$i]}
EOF
    echo "$state/cs$i/chunks" >"$state"/cs$i/mfshdd.cfg
done

# --- daemons -------------------------------------------------------------------
echo "$prog: starting mfsmaster ($host:$ml_port, $cshost:$cs_port, $host:$cl_port)"
timeout 60 ip netns exec "$ns" mfsmaster -c "$state"/master/mfsmaster.cfg start >"$state"/master.log 2>&1 ||
    { cat "$state"/master.log >&2; die "mfsmaster did not start (log above, also $state/master.log)"; }
for i in 1 2; do
    echo "$prog: starting chunkserver $i ($cshost:${csserv_port[$i]})"
    timeout 60 ip netns exec "$ns" mfschunkserver -c "$state"/cs$i/mfschunkserver.cfg start >"$state"/cs$i.log 2>&1 ||
        { cat "$state"/cs$i.log >&2; die "chunkserver $i did not start (log above, also $state/cs$i.log)"; }
done

# How many of our two chunkservers the master has registered.
connected_chunkservers() {
    if command -v mfscli >/dev/null; then
        timeout 10 ip netns exec "$ns" mfscli -H "$host" -P "$cl_port" -n -p -s $'\t' -SCS 2>/dev/null |
            awk -F'\t' -v a="$cshost" -v p1="${csserv_port[1]}" -v p2="${csserv_port[2]}" '
                { for (i = 1; i < NF; i++) if ($i == a && ($(i+1) == p1 || $(i+1) == p2)) seen[$(i+1)] = 1 }
                END { n = 0; for (k in seen) n++; print n }'
    else
        # Without mfscli: chunkserver connections established to the master.
        in_ns ss -Htn state established "( sport = :$cs_port )" 2>/dev/null | wc -l
    fi
}
deadline=$((SECONDS + 60))
until [ "$(connected_chunkservers)" -ge 2 ]; do
    [ $SECONDS -lt $deadline ] || die "the master does not see both chunkservers after 60 s (logs: $state/*.log, syslog)"
    sleep 1
done
echo "$prog: the master sees both chunkservers"

# --- mount -----------------------------------------------------------------------
mkdir -p -- "$mnt"
# shellcheck disable=SC2086 # MFSMOUNT_OPTS is a list of options
# nsenter enters only the network namespace, so the mount lands in the
# machine's mount table while mfsmount talks to the master inside.
timeout 60 nsenter --net=/run/netns/"$ns" mfsmount "$mnt" -H "$host" -P "$cl_port" ${MFSMOUNT_OPTS-} >"$state"/mount.log 2>&1 ||
    { cat "$state"/mount.log >&2; die "mfsmount $mnt failed (log above)"; }
deadline=$((SECONDS + 30))
until mountpoint -q -- "$mnt"; do
    [ $SECONDS -lt $deadline ] || die "$mnt is not mounted 30 s after mfsmount returned"
    sleep 0.5
done

# The tools ask the master at the address .masterinfo names: the
# namespace's 127.0.0.1.
timeout 60 nsenter --net=/run/netns/"$ns" mfssetgoal -r 1 "$mnt" >/dev/null || die "mfssetgoal -r 1 $mnt failed"
timeout 60 nsenter --net=/run/netns/"$ns" mfssettrashtime -r 0 "$mnt" >/dev/null || die "mfssettrashtime -r 0 $mnt failed"

echo "moosefs mounted at $mnt"
