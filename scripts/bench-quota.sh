#!/usr/bin/env bash
# What enforcing quotas costs: mdtest creates and removes and IOR-easy
# writes by an unprivileged user (uid 65534, whose changes quotas limit;
# root's are not) with no limits, and with inode and block limits set far
# above what the run makes on its user and group (every create and write
# then counts against shares from the quota master), interleaved round
# by round, each on a fresh `loom up --mdts 2 --osts 4` (ext4 beside
# each, as the reference).
#
#   ./scripts/bench-quota.sh LOOM [ROUNDS]   (as root; default 3)
#
# Noise as in perf-gate.sh: the largest distance of any round's value
# from its own state's median. Results: /var/tmp/loom-quota/.
set -euo pipefail
source "$(dirname "$0")/ab-lib.sh"
[ $# -ge 1 ] && [ -x "$1" ] || { echo "usage: $0 LOOM [ROUNDS]" >&2; exit 2; }
loom=$(realpath "$1") rounds=${2:-3}
[[ $rounds =~ ^[1-9][0-9]*$ ]] || { echo "$0: ROUNDS must be a positive number" >&2; exit 2; }
state=/var/tmp/loom-quota-state mnt=/mnt/loom-quota out=/var/tmp/loom-quota ext4=/var/tmp/loom-quota-ext4
bin=([old]=$loom [new]=$loom)
trap ab_cleanup EXIT
rm -rf "$out" "$ext4"; mkdir -p "$out" "$ext4"
chmod 777 "$out" "$ext4"
user=(setpriv --reuid=65534 --regid=65534 --clear-groups)

for round in $(seq 1 "$rounds"); do
    order="off on"
    [ $((round % 2)) -eq 0 ] && order="on off"
    for s in $order; do
        echo "== round $round of $rounds: limits $s" >&2
        ab_fresh_cluster "$loom" "$state" "$mnt" "$out/up.log"
        mkdir -p "$mnt/md" "$mnt/io"
        chmod 777 "$mnt/md" "$mnt/io"
        if [ "$s" = on ]; then
            "$loom" setquota -u 65534 -I 100000000 -B 1T "$mnt"
            "$loom" setquota -g 65534 -i 50000000 -I 100000000 -b 500G -B 1T "$mnt"
        fi
        # The user's tools read the mount's client key (issue #29).
        chmod 644 "$state/client.key"
        (cd "$out" && timeout 900 "${user[@]}" "$loom" bench compare md -F -u -n 2000 -p 4 -i 1 \
            --no-progress --json "$out/md-$s-$round.json" ext4="$ext4" loomfs="$mnt/md" \
            >"$out/md-$s-$round.txt")
        (cd "$out" && timeout 900 "${user[@]}" "$loom" bench compare io -t 1m -b 256m -p 2 -F -w \
            --no-progress --json "$out/easy-$s-$round.json" ext4="$ext4" loomfs="$mnt/io" \
            >"$out/easy-$s-$round.txt")
        "$loom" down --dir "$state" >/dev/null
        wait
    done
done

python3 "$(dirname "$0")/onoff-table.py" "$out" "File creation" "File removal" "write"
