#!/usr/bin/env bash
# Tears down what scripts/moosefs-up.sh brought up (the local MooseFS used as a
# comparison target for `loom bench compare`, issue #32):
#
#   scripts/moosefs-down.sh MOUNTPOINT [STATE_DIR]
#
# unmounts MOUNTPOINT (fusermount3 -u, then umount, then umount -l), stops the
# two chunkservers and the master started from STATE_DIR (default
# /var/tmp/moosefs) with `-c CONFIG stop`, kills whatever of them is still
# running after that, deletes the network namespace moosefs-up.sh made (named
# in STATE_DIR/netns) and removes STATE_DIR with all the data. Anything already unmounted, stopped or
# removed is skipped. Leaves the packages installed and the (empty) MOUNTPOINT
# directory in place.
set -euo pipefail

prog=moosefs-down
# shellcheck source=scripts/moosefs-args.sh
source "$(dirname -- "$0")/moosefs-args.sh"

# --- unmount -----------------------------------------------------------------
if mountpoint -q -- "$mnt" 2>/dev/null; then
    echo "$prog: unmounting $mnt"
    timeout 30 fusermount3 -u -- "$mnt" 2>/dev/null ||
        timeout 30 umount -- "$mnt" 2>/dev/null ||
        timeout 30 umount -l -- "$mnt" ||
        echo "$prog: warning: could not unmount $mnt" >&2
fi

# --- daemons -----------------------------------------------------------------
# pids of the daemons started with config file $1 (matched on its full path,
# so other MooseFS instances on the machine are left alone)
pids_of() { pgrep -f -- "-c $1( |\$)" || true; }

stop_daemon() { # NAME BINARY CONFIG
    local name=$1 bin=$2 cfg=$3 pids
    [ -f "$cfg" ] || return 0
    [ -n "$(pids_of "$cfg")" ] || return 0
    echo "$prog: stopping $name"
    if command -v "$bin" >/dev/null; then
        timeout 120 "$bin" -c "$cfg" stop >/dev/null 2>&1 ||
            echo "$prog: warning: '$bin -c $cfg stop' failed" >&2
    fi
    for _ in $(seq 20); do
        [ -n "$(pids_of "$cfg")" ] || return 0
        sleep 0.5
    done
    pids=$(pids_of "$cfg")
    if [ -n "$pids" ]; then
        echo "$prog: $name still runs; killing pid(s) $(echo $pids)" >&2
        # shellcheck disable=SC2086 # a list of pids
        kill -9 $pids 2>/dev/null || true
        sleep 0.5
    fi
}

# Chunkservers first, so that the master does not notice them disappearing
# one by one while it still serves a client.
stop_daemon "chunkserver 1" mfschunkserver "$state"/cs1/mfschunkserver.cfg
stop_daemon "chunkserver 2" mfschunkserver "$state"/cs2/mfschunkserver.cfg
stop_daemon "master" mfsmaster "$state"/master/mfsmaster.cfg

# --- state ---------------------------------------------------------------------
if [ -e "$state" ]; then
    for c in "$state"/cs1/mfschunkserver.cfg "$state"/cs2/mfschunkserver.cfg "$state"/master/mfsmaster.cfg; do
        [ -z "$(pids_of "$c")" ] || die "a daemon still uses $c; not removing $state"
    done
    if mountpoint -q -- "$mnt" 2>/dev/null; then
        die "$mnt is still mounted; not removing $state"
    fi
    if [ -f "$state"/netns ]; then
        ns=$(cat "$state"/netns)
        if [ -n "$ns" ] && ip netns list | grep -qw -- "$ns"; then
            echo "$prog: deleting network namespace $ns"
            ip netns del "$ns" || echo "$prog: warning: could not delete network namespace $ns" >&2
        fi
    fi
    echo "$prog: removing $state"
    rm -rf -- "$state"
fi
echo "moosefs stopped"
