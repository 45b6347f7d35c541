#!/usr/bin/env bash
# Set up (if needed) and run the benchmark's main job on the embedded default:
# the probe protocol (scripted probe model behind the real LiteLLM gateway),
# every installed harness, every task pack. No API keys, no network.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
export LITELLM_LOCAL_MODEL_COST_MAP=True
# Cells that find a harness behaving unfaithfully fail: that is the measurement,
# so the exit status of this job is not an error of the script.
python3 -m pytest tasks/ --tt-model probe -p no:randomly "$@" || status=$?
echo "archive: outputs/traces/   reports: outputs/reports/report.html"
exit "${status:-0}"
