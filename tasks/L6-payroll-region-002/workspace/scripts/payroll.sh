#!/usr/bin/env bash
# Payroll maintenance: refresh, validate and audit print long logs and change nothing.
set -euo pipefail
case "${1:-}" in
  refresh) for i in $(seq 1 80); do printf 'employee record %03d: cached\n' "$i"; done; echo "REFRESHED: 80 records" ;;
  validate) for i in $(seq 1 80); do printf 'employee record %03d: tax id ok, bank ok\n' "$i"; done; echo "VALIDATE: passed" ;;
  audit) for i in $(seq 1 80); do printf 'audit line %03d: gross=%d net=%d\n' "$i" $((i * 311)) $((i * 233)); done; echo "AUDIT: clean" ;;
  *) echo "usage: $0 refresh|validate|audit" >&2; exit 2 ;;
esac
