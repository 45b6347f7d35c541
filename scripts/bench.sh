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
# The machine's cores by default (TT_BENCH_WORKERS=N to choose, 1 for one cell at a time);
# an -n of your own wins.
workers="${TT_BENCH_WORKERS:-auto}"
output=outputs
parallel=("-n" "$workers")
prev=""
for arg in "$@"; do
  case "$arg" in
    -n|-n*|--numprocesses*|--dist*) parallel=() ;;
    --tt-output=*) output="${arg#--tt-output=}" ;;
  esac
  if [ "$prev" = "--tt-output" ]; then output="$arg"; fi
  prev="$arg"
done
if [ "$workers" = "1" ]; then parallel=(); fi
mkdir -p "$output"
junit="$output/bench-junit.xml"
status=0
python3 -m pytest tasks/ --tt-model probe "${parallel[@]}" --junitxml="$junit" "$@" || status=$?
# Where the time went, from the archive just written (per phase, per harness).
python3 benchmarks/cell_overhead.py --from "$output" --junit "$junit" || true
echo "archive: $output/traces/   reports: $output/reports/report.html"
if [ "$status" -eq 1 ]; then
  echo "some cells failed criteria: see the per-cell lines above and the report"
  exit 0
fi
exit "$status"
