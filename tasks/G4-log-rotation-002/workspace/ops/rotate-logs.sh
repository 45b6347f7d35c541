#!/usr/bin/env bash
# Rotate the service logs: keep one generation as <log>.1 and start every log empty.
# Runbook step "log rotation" (ops/RUNBOOK.md). Run from the service root: bash ops/rotate-logs.sh
status=0
for f in logs/*.log data/*.log; do
  [ -f "$f" ] || continue
  if cp "$f" "$f.1" && : > "$f"; then
    echo "rotated $f"
  else
    status=1
  fi
done
exit "$status"
