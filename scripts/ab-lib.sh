# Shared by the A/B scripts (ab.sh, ab-io.sh, ab-md.sh); sourced, not run.
#
#   ab_init NAME DEFAULT_ROUNDS OLD_LOOM NEW_LOOM [ROUNDS]
#       checks the arguments and sets bin[old], bin[new] and rounds
#   ab_fresh_cluster LOOM STATE MNT LOG
#       stops whatever runs in STATE, and starts a new `loom up --mdts 2
#       --osts 4` there, mounted at MNT; returns once it is mounted
#   ab_wait_for LOG
#       waits (30 s at most) until LOG says "mounted at"
#   ab_run OUT LOOM NAME -- BENCH_COMPARE_ARGS...
#       runs `LOOM bench compare ARGS` in OUT, its table in OUT/NAME.txt
#       and its figures in OUT/NAME.json
# Every script stops its clusters on exit (ab_cleanup, trapped by ab_init).

declare -A bin
ab_init() {
    local name=$1 default=$2
    shift 2
    [ $# -ge 2 ] || { echo "usage: $name OLD_LOOM NEW_LOOM [ROUNDS]" >&2; exit 2; }
    for b in "$1" "$2"; do
        [ -x "$b" ] || { echo "$name: $b is not an executable loom binary" >&2; exit 2; }
    done
    [[ ${3:-$default} =~ ^[1-9][0-9]*$ ]] || { echo "$name: ROUNDS must be a positive number, not '$3'" >&2; exit 2; }
    bin=([old]=$(realpath "$1") [new]=$(realpath "$2"))
    rounds=${3:-$default}
    trap ab_cleanup EXIT
}

ab_cleanup() {
    for b in old new; do "${bin[$b]}" down --dir "$state" >/dev/null 2>&1 || true; done
}

ab_wait_for() {
    for _ in $(seq 1 300); do grep -q "^mounted at" "$1" 2>/dev/null && return 0; sleep 0.1; done
    cat "$1"; return 1
}

ab_fresh_cluster() {
    local loom=$1 st=$2 mnt=$3 log=$4
    "$loom" down --dir "$st" >/dev/null 2>&1 || true
    rm -rf "$st"
    "$loom" up --mdts 2 --osts 4 --dir "$st" --mount "$mnt" >"$log" 2>&1 &
    ab_wait_for "$log"
}

ab_run() {
    local out=$1 loom=$2 name=$3
    shift 4
    (cd "$out" && timeout 900 "$loom" bench compare "$@" --no-progress \
        --json "$out/$name.json" >"$out/$name.txt")
}
