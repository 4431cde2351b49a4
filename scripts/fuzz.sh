#!/usr/bin/env bash
# loomfs: run each fuzz target of fuzz/ (issue #33, point 6) for SECONDS,
# starting from its corpus in fuzz/corpus/TARGET (read, not grown: new
# inputs go to a temporary directory; add them with `cargo fuzz cmin`).
#
#   scripts/fuzz.sh SECONDS [TARGET...]     (default: every target)
#
# Needs a nightly toolchain (cargo-fuzz builds with its sanitizers) and
# cargo-fuzz, which it installs from crates.io if missing. Without
# nightly it replays the corpora on stable instead, and says so.
# An input that crashes, hangs (10 s) or allocates over 256 MB is kept
# under fuzz/artifacts/TARGET/ and the script fails.
set -euo pipefail
cd "$(dirname "$0")/.."

usage() { echo "usage: $0 SECONDS [TARGET...]" >&2; exit 2; }
[ $# -ge 1 ] || usage
secs=$1; shift
[[ "$secs" =~ ^[1-9][0-9]*$ ]] || { echo "fuzz.sh: SECONDS must be a positive whole number, not '$secs'" >&2; usage; }
all=(frame message mdt_record ost_object)
targets=("$@")
[ ${#targets[@]} -gt 0 ] || targets=("${all[@]}")
for t in "${targets[@]}"; do
    [ -d "fuzz/corpus/$t" ] || { echo "fuzz.sh: no target '$t' (targets: ${all[*]})" >&2; exit 2; }
done

if ! cargo +nightly --version >/dev/null 2>&1; then
    echo "fuzz.sh: no nightly toolchain here: replaying the corpora on stable instead of fuzzing" >&2
    exec cargo test --manifest-path fuzz/Cargo.toml --quiet
fi
if ! cargo fuzz --version >/dev/null 2>&1; then
    echo "== installing cargo-fuzz"
    if ! cargo install cargo-fuzz --locked --quiet; then
        echo "fuzz.sh: cargo-fuzz could not be installed: replaying the corpora on stable instead of fuzzing" >&2
        exec cargo test --manifest-path fuzz/Cargo.toml --quiet
    fi
fi
echo "== building the fuzz targets (nightly, address sanitizer, debug assertions)"
cargo +nightly fuzz build -a 2>&1 | tail -n 2
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
for t in "${targets[@]}"; do
    echo "== fuzzing $t for ${secs}s"
    mkdir -p "$work/$t"
    status=0
    cargo +nightly fuzz run -a "$t" "$work/$t" "fuzz/corpus/$t" -- \
        -max_total_time="$secs" -timeout=10 -rss_limit_mb=2048 -malloc_limit_mb=256 \
        -print_final_stats=1 > "$work/$t.log" 2>&1 || status=$?
    grep -E "^stat::(number_of_executed_units|new_units_added)|INFO: seed corpus|Done [0-9]+ runs" "$work/$t.log" || true
    if [ "$status" -ne 0 ]; then
        tail -n 40 "$work/$t.log" >&2
        echo "fuzz.sh: $t failed (exit $status); the input is under fuzz/artifacts/$t/" >&2
        exit 1
    fi
done
echo "== fuzz: no failure in ${targets[*]}"
