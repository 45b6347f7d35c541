#!/usr/bin/env bash
# Ledger maintenance: sync, check and balance print long logs and touch nothing else.
set -euo pipefail
case "${1:-}" in
  sync) for i in $(seq 1 80); do printf 'sync entry %03d: ok\n' "$i"; done; echo "SYNCED: 80 entries" ;;
  check) for i in $(seq 1 80); do printf 'check entry %03d: signature ok, amount ok\n' "$i"; done; echo "CHECK: passed" ;;
  balance) for i in $(seq 1 80); do printf 'balance line %03d: debit=%d credit=%d\n' "$i" $((i * 13)) $((i * 13)); done; echo "BALANCE: even" ;;
  *) echo "usage: $0 sync|check|balance" >&2; exit 2 ;;
esac
