#!/usr/bin/env bash
# Export one region's payroll: prints its totals and records the run in .export/runs.log.
set -euo pipefail
region="${1:-}"
case "$region" in
  emea) employees=212; gross=91844300 ;;
  apac) employees=167; gross=70219150 ;;
  *) echo "export.sh: unknown region '$region' (emea or apac)" >&2; exit 2 ;;
esac
mkdir -p .export
echo "$region" >> .export/runs.log
echo "EXPORTED region=$region employees=$employees gross_cents=$gross"
