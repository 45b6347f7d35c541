#!/usr/bin/env bash
# Set up (if needed) and run the benchmark's main job on the embedded default:
# the probe protocol (scripted probe model behind the real LiteLLM gateway),
# every installed harness, every task pack. No API keys, no network.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export LITELLM_LOCAL_MODEL_COST_MAP=True
# Cells that find a harness behaving unfaithfully fail: that is the measurement, not an
# error of this job (pytest exit 1). Gate on regressions with `tracetrial gate`; any other
# pytest status (interrupted, internal or usage error, nothing collected) is an error.
status=0
python3 -m pytest tasks/ --tt-model probe "$@" || status=$?
echo "archive: outputs/traces/   reports: outputs/reports/report.html"
if [ "$status" -eq 1 ]; then
  echo "some cells failed criteria: see the per-cell lines above and the report"
  exit 0
fi
exit "$status"
