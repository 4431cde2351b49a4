#!/usr/bin/env bash
# loomfs: set up this machine and run the demo or the tests.
#
#   ./scripts/run.sh demo   build, start a local cluster with `loom up`, mount
#                           it, show it working (write, list, stripe, df, scrub), stop
#   ./scripts/run.sh test   build and pass the whole test suite (what CI runs)
#
# Needs root (FUSE mounts) on Debian 12; installs what it needs.
set -euo pipefail
cd "$(dirname "$0")/.."

need_root() {
    if [ "$(id -u)" -ne 0 ]; then
        echo "run.sh: run as root (FUSE mounts and apt-get need it)" >&2
        exit 1
    fi
}

setup() {
    need_root
    local pkgs=(fuse3 fio git attr acl python3 libcap2-bin iproute2 util-linux libc6-dev pkg-config build-essential curl ca-certificates prometheus chromium postgresql)
    local missing=()
    for p in "${pkgs[@]}"; do
        dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
    done
    if [ ${#missing[@]} -gt 0 ]; then
        echo "== installing ${missing[*]}"
        apt-get update -qq
        DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${missing[@]}" >/dev/null
    fi
    if ! command -v cargo >/dev/null 2>&1; then
        [ -x "$HOME/.cargo/bin/cargo" ] || {
            echo "== installing the Rust toolchain (rustup)"
            curl --proto '=https' --tlsv1.2 -sSf https://sh.rustup.rs | sh -s -- -y --profile minimal
        }
        export PATH="$HOME/.cargo/bin:$PATH"
    fi
    # The policy engine's PostgreSQL catalog tests need a running server
    # (the tests make their own role and databases).
    if command -v pg_lsclusters >/dev/null 2>&1; then
        pg_lsclusters -h | while read -r ver name _ state _; do
            [ "$state" = online ] || pg_ctlcluster "$ver" "$name" start
        done
    fi
    modprobe fuse 2>/dev/null || true
    [ -e /dev/fuse ] || { echo "run.sh: /dev/fuse is missing; FUSE is not available here" >&2; exit 1; }
    # Users other than root mount through fusermount3 after opening
    # /dev/fuse themselves: Debian's udev makes it 0666, a container may not.
    chmod 0666 /dev/fuse
}

demo() {
    setup
    echo "== building (release)"
    cargo build --release -q -p loom
    # Globals, not locals: the EXIT trap runs after this function has returned.
    loom=target/release/loom state=/var/tmp/loom-demo mnt=/mnt/loom-demo
    "$loom" down --dir "$state" >/dev/null 2>&1 || true
    echo "== loom up: 1 MGS, 2 MDTs, 4 OSTs, each its own server process"
    "$loom" up --mdts 2 --osts 4 --dir "$state" --mount "$mnt" > /var/tmp/loom-demo.log 2>&1 &
    local up=$!
    trap '"$loom" down --dir "$state" >/dev/null 2>&1 || true' EXIT
    for _ in $(seq 1 600); do
        grep -q "^mounted at" /var/tmp/loom-demo.log 2>/dev/null && break
        kill -0 "$up" 2>/dev/null || { cat /var/tmp/loom-demo.log; exit 1; }
        sleep 0.1
    done
    cat /var/tmp/loom-demo.log
    set -x
    # The state persists between runs (that is the point of --dir): start
    # the demo's files afresh.
    rm -rf "$mnt/demo"
    mkdir -p "$mnt/demo"
    "$loom" setstripe -c 4 -S 1M "$mnt/demo/wide.bin"
    dd if=/dev/urandom of="$mnt/demo/wide.bin" bs=1M count=16 status=none
    "$loom" getstripe "$mnt/demo/wide.bin"
    # A directory striped over both MDTs: its names are hashed over them.
    "$loom" setdirstripe -c 2 "$mnt/demo/linux-headers"
    "$loom" getdirstripe "$mnt/demo/linux-headers"
    cp -r /usr/include/linux/. "$mnt/demo/linux-headers"
    ls -la "$mnt/demo" | head
    find "$mnt/demo" -type f | wc -l
    diff -r /usr/include/linux "$mnt/demo/linux-headers" && echo "copy verified"
    "$loom" df -H "$mnt"
    "$loom" df -i "$mnt"
    # Every block and record against its checksum.
    "$loom" scrub "$mnt"
    set +x
    echo "== stopping (loom down)"
    "$loom" down --dir "$state"
    trap - EXIT
    echo "== demo done; run it yourself with: $loom up --dir $state --mount $mnt"
}

tests() {
    setup
    echo "== cargo fmt --check, clippy"
    cargo fmt --all -- --check
    cargo clippy --workspace --all-targets -q -- -D warnings
    echo "== cargo test"
    # A clean build compiles once: incremental state would only fill the disk.
    CARGO_INCREMENTAL=0 cargo test --workspace
    echo "== fuzz: each decoder's target from its corpus, briefly"
    CARGO_INCREMENTAL=0 scripts/fuzz.sh 20
}

case "${1:-}" in
    demo) demo ;;
    test) tests ;;
    *) echo "usage: $0 demo|test" >&2; exit 2 ;;
esac
