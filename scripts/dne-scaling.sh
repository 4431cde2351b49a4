#!/usr/bin/env bash
# DNE scaling (issue #10): create and remove rates against the number of
# MDTs, on a cluster whose MDTs each have a host of their own.
#
#   ./scripts/dne-scaling.sh LOOM [ITERATIONS] [RATE] [PROCS] [FILES]
#
# Hosts are network namespaces on a bridge this script makes (addresses
# of a private subnet on that bridge only): h0 runs the MGS and MDT0, h1
# to h3 MDT1 to MDT3, h4 the four OSTs; the client mounts from the root
# namespace. Each MDT host's link is capped at RATE (tbf, both
# directions; 4mbit by default), standing in for a server's own capacity:
# on this 2-vCPU machine every process shares the same cores and disk, so
# without a cap per host nothing could show what a second MDT adds. The
# cap is what each MDT can serve; the client and the OSTs are not capped.
#
# Three directories get a default placement over 1, 2 and 4 MDTs
# (`setdirstripe -D -i 0`, `-i 0,1`, `-i 0,1,2,3`), and `loom bench
# compare md -F -u` runs PROCS processes (16) with FILES empty files each
# (500) in each, the three interleaved in every iteration. Each process's
# directory goes to the next MDT of its directory's list. Writes the
# chart to docs/charts/dne-scaling-RATE.{svg,png,json} and prints `loom df -i`
# (operations per MDT) after the run.
set -euo pipefail
cd "$(dirname "$0")/.."
loom=${1:?usage: dne-scaling.sh LOOM [ITERATIONS] [RATE] [PROCS] [FILES]}
iters=${2:-3}
rate=${3:-4mbit}
procs=${4:-16}
files=${5:-500}
[ -x "$loom" ] || { echo "dne-scaling.sh: $loom is not an executable loom binary" >&2; exit 2; }
for n in "$iters" "$procs" "$files"; do
    [[ $n =~ ^[1-9][0-9]*$ ]] || { echo "dne-scaling.sh: '$n' is not a positive number" >&2; exit 2; }
done
[[ $rate =~ ^[0-9]+[kmg]?bit$ ]] || { echo "dne-scaling.sh: RATE is a tc rate such as 4mbit, not '$rate'" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "dne-scaling.sh: needs root (network namespaces, FUSE)" >&2; exit 2; }
loom=$(realpath "$loom")

tag=lmd$$
subnet=10.214.$((RANDOM % 250))
bridge=${tag}br
work=/var/tmp/loom-dne-$$
mnt=$work/mnt
hosts=5
pids=()
cleanup() {
    umount -l "$mnt" 2>/dev/null || true
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    for p in "${pids[@]}"; do wait "$p" 2>/dev/null || true; done
    for i in $(seq 0 $((hosts - 1))); do ip netns del "${tag}h$i" 2>/dev/null || true; done
    ip link del "$bridge" 2>/dev/null || true
    rm -rf "$work"
}
trap cleanup EXIT
mkdir -p "$work/cfg"

ip link add "$bridge" type bridge
ip addr add "$subnet.254/24" dev "$bridge"
ip link set "$bridge" up
for i in $(seq 0 $((hosts - 1))); do
    ns=${tag}h$i v=${tag}v$i p=${tag}p$i
    ip netns add "$ns"
    ip link add "$v" type veth peer name "$p"
    ip link set "$v" netns "$ns"
    ip link set "$p" master "$bridge"
    ip link set "$p" up
    ip -n "$ns" addr add "$subnet.$((i + 1))/24" dev "$v"
    ip -n "$ns" link set "$v" up
    ip -n "$ns" link set lo up
    if [ "$i" -lt 4 ]; then
        # The MDT host's capacity: its replies (egress inside) and the
        # requests sent to it (egress of its bridge port).
        ip netns exec "$ns" tc qdisc add dev "$v" root tbf rate "$rate" burst 4kb latency 200ms
        tc qdisc add dev "$p" root tbf rate "$rate" burst 4kb latency 200ms
    fi
done

key=$work/dne.key
"$loom" keygen "$key" >/dev/null
fmt() { "$loom" format "$1" --index "$2" --fsname dne "$3" >/dev/null; }
fmt --mgs 0 "$work/h0/mgs"
for m in 0 1 2 3; do fmt --mdt "$m" "$work/h$m/mdt$m"; done
for o in 0 1 2 3; do fmt --ost "$o" "$work/h4/ost$o"; done
mgs=$subnet.1:7000
cfg() { # host, targets...
    local h=$1; shift
    local t=()
    for x in "$@"; do t+=("\"$x\""); done
    printf 'fsname = "dne"\nlisten = "%s:7000"\nmgs = "%s"\nkey_file = "%s"\ntargets = [%s]\ntimeout_secs = 60\n' \
        "$subnet.$((h + 1))" "$mgs" "$key" "$(IFS=,; echo "${t[*]}")" >"$work/cfg/h$h.toml"
}
cfg 0 "$work/h0/mgs" "$work/h0/mdt0"
for m in 1 2 3; do cfg "$m" "$work/h$m/mdt$m"; done
cfg 4 "$work/h4/ost0" "$work/h4/ost1" "$work/h4/ost2" "$work/h4/ost3"

wait_for() { # log, text, what
    for _ in $(seq 1 300); do grep -q "$2" "$1" 2>/dev/null && return 0; sleep 0.1; done
    echo "dne-scaling.sh: $3 did not start:" >&2
    cat "$1" >&2
    exit 1
}
for h in 0 1 2 3 4; do
    nsenter --net="/run/netns/${tag}h$h" "$loom" server --config "$work/cfg/h$h.toml" >"$work/h$h.log" 2>&1 &
    pids+=($!)
    wait_for "$work/h$h.log" "loom server: serving" "host $h"
done
mkdir -p "$mnt"
"$loom" mount "$mgs:/dne" "$mnt" --key-file "$key" --foreground >"$work/mount.log" 2>&1 &
pids+=($!)
wait_for "$work/mount.log" "mounted at" "the mount"

for n in 1 2 4; do
    mkdir "$mnt/d$n"
    "$loom" setdirstripe -D -i "$(seq -s, 0 $((n - 1)))" "$mnt/d$n"
done
echo "== $procs processes, $files empty files each, MDT links capped at $rate, $iters iterations"
mkdir -p docs/charts
"$loom" bench compare md -F -u -n "$files" -p "$procs" -i "$iters" --no-progress \
    --chart "docs/charts/dne-scaling-$rate" --json "docs/charts/dne-scaling-$rate.json" \
    mdt1="$mnt/d1" mdt2="$mnt/d2" mdt4="$mnt/d4"
echo "== operations per MDT (loom df -i)"
"$loom" df -i "$mnt"
