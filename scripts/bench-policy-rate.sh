#!/usr/bin/env bash
# The policy engine's rate limit (issue #31): 20 purge candidates on a
# fresh `loom up --mdts 1 --osts 2`, `loom policy run --once` with --rate 4
# (actions a second) and with --rate 0 (no limit), three times each:
#
#   ./scripts/bench-policy-rate.sh LOOM   (as root)
set -euo pipefail
L=$(realpath "${1:?usage: bench-policy-rate.sh LOOM}"); base=/var/tmp/loom-rate; mnt=/mnt/loom-rate
mkdir -p $mnt; rm -rf $base
trap '$L down --dir $base >/dev/null 2>&1 || true' EXIT
$L up --mdts 1 --osts 2 --dir $base --mount $mnt > /var/tmp/rate-up.log 2>&1 &
for _ in $(seq 1 300); do grep -q "^mounted at" /var/tmp/rate-up.log && break; sleep 0.1; done
printf '[[purge]]\nname = "s"\ntree = "/s"\nunused_days = 30\n' > /var/tmp/rate-rules.toml
for rate in 4 0 4 0 4 0; do
  rm -rf $mnt/s; mkdir $mnt/s
  for i in $(seq 1 20); do echo x > $mnt/s/f$i; touch -d '40 days ago' $mnt/s/f$i; done
  rm -f /var/tmp/rate-cat.sqlite*
  $L policy scan $mnt -q --catalog /var/tmp/rate-cat.sqlite >/dev/null
  t0=$(date +%s.%N)
  $L policy run $mnt --rules /var/tmp/rate-rules.toml --once --rate $rate --catalog /var/tmp/rate-cat.sqlite > /var/tmp/rate-run.log
  t1=$(date +%s.%N)
  echo "rate $rate: $(grep -c ': done' /var/tmp/rate-run.log) purged in $(echo "$t1 - $t0" | bc) s"
  $L policy forget $mnt --catalog /var/tmp/rate-cat.sqlite >/dev/null
done
