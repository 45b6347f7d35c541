#!/usr/bin/env bash
# Order-batch import wrapper: runs the importer and keeps a copy of its log.
# set -o pipefail makes the pipeline's status the importer's, not tee's.
set -o pipefail
mkdir -p logs
# The wrapper's own diagnostics (e.g. bash job notices) go to a log file, not the terminal.
exec 2>>logs/run_import.err
python3 importer.py 2>&1 | tee -a logs/import.log
