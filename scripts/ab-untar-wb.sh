#!/usr/bin/env bash
# A/B of the untar of /usr/include on a --write-back mount: two loom
# builds, interleaved round by round, each on a fresh `loom up --mdts 2
# --osts 4`; wall seconds (the untar and an fsync of its directory) and
# every server's CPU (utime + stime, /proc/PID/stat) per untarred file.
#   ./scripts/ab-untar-wb.sh OLD_LOOM NEW_LOOM [ROUNDS]   (as root)
set -euo pipefail
source "$(dirname "$0")/ab-lib.sh"
ab_init ab-untar-wb.sh 3 "$@"
state=/var/tmp/loom-ab-untar-state wb=/mnt/loom-ab-untar tarball=/var/tmp/loom-bench-include.tar
log=/var/tmp/loom-ab-untar-up.log
[ -f "$tarball" ] || tar cf "$tarball" -C /usr include
mkdir -p "$wb"
files=$(tar tf "$tarball" | wc -l) hz=$(getconf CLK_TCK)
server_cpu() {
    local total=0
    for f in "$state"/pids/*.pid; do
        set -- $(sed 's/.*) //' "/proc/$(cat "$f")/stat")
        total=$((total + ${12} + ${13}))
    done
    echo "$total"
}
trap 'fusermount3 -uz "$wb" 2>/dev/null || true; ab_cleanup' EXIT
for r in $(seq 1 "$rounds"); do
    order="old new"; [ $((r % 2)) -eq 0 ] && order="new old"
    for b in $order; do
        loom=${bin[$b]}
        fusermount3 -uz "$wb" 2>/dev/null || true
        "$loom" down --dir "$state" >/dev/null 2>&1 || true
        rm -rf "$state"
        "$loom" up --mdts 2 --osts 4 --dir "$state" --no-mount >"$log" 2>&1 &
        for _ in $(seq 1 300); do grep -q "is up" "$log" 2>/dev/null && break; sleep 0.1; done
        mgs=$(grep -o "MGS at [0-9.:]*" "$log" | cut -d' ' -f3)
        "$loom" mount "$mgs:/loom" "$wb" --key-file "$state/client.key" --write-back >/dev/null
        mkdir -p "$wb/u"; sync
        c0=$(server_cpu); s=$(date +%s.%N)
        tar xf "$tarball" -C "$wb/u"
        python3 -c 'import os, sys; fd = os.open(sys.argv[1], os.O_RDONLY); os.fsync(fd)' "$wb/u"
        e=$(date +%s.%N); c1=$(server_cpu)
        awk -v r="$r" -v b="$b" -v s="$s" -v e="$e" -v c=$((c1 - c0)) -v hz="$hz" -v f="$files" \
            'BEGIN { printf "round %s %s: untar %.2f s, server CPU %.3f ms/file\n", r, b, e - s, c / hz * 1000 / f }'
    done
done
