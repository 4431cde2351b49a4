# Sourced by scripts/moosefs-up.sh and moosefs-down.sh (which set `prog`):
# `die`, and their shared arguments, MOUNTPOINT [STATE_DIR], checked and
# made absolute in `mnt` and `state`.
die() { echo "$prog: $*" >&2; exit 1; }

[ $# -ge 1 ] && [ $# -le 2 ] || { echo "usage: $prog MOUNTPOINT [STATE_DIR]" >&2; exit 2; }
[ "$(id -u)" -eq 0 ] || die "must run as root (the daemons run as root, FUSE mounts, apt-get)"
[ -n "$1" ] || die "MOUNTPOINT is empty"
[ -n "${2-x}" ] || die "STATE_DIR is empty"
mnt=$(realpath -m -- "$1")
state=$(realpath -m -- "${2:-/var/tmp/moosefs}")
# STATE_DIR is removed whole by moosefs-down.sh.
case $state in /|/var|/var/tmp|/tmp|/root|/home|/etc|/usr) die "refusing to use $state as STATE_DIR";; esac
