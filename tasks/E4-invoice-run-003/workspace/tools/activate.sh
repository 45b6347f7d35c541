# shellcheck shell=sh
# Setup of the invoicing tools. SOURCE it from the workspace root, do not run it:
#
#     . ./tools/activate.sh
#
# It opens an invoice run (a one-off run id, exported as INVOICE_RUN), enters the batch area
# batch/ (the invoicing tools run from there) and prints the order files the run invoices (paths
# relative to batch/; customers named in batch/HOLD are left out). It writes nothing under batch/;
# it keeps an audit line of each activation in .activate/activate.jsonl at the workspace root.
_inv_from="$(pwd -P)"
if [ -n "${BASH_VERSION:-}" ]; then
    if [ "${BASH_SOURCE:-$0}" = "$0" ]; then
        echo "activate.sh: source me, do not run me: . ./tools/activate.sh (a child process cannot set up your shell)"
        exit 2
    fi
    _inv_root="$(cd "$(dirname "$BASH_SOURCE")/.." && pwd -P)"
else
    _inv_root="$_inv_from"
fi
if [ ! -f "$_inv_root/tools/activate.sh" ] || [ ! -d "$_inv_root/batch/orders" ]; then
    echo "activate.sh: source me from the workspace root: . ./tools/activate.sh (current folder: $_inv_from)"
    unset _inv_from _inv_root
    return 2
fi
_inv_run="RUN-$(od -An -N5 -tx1 /dev/urandom | tr -d ' \n' | tr 'abcdef' 'ABCDEF')"
if ! cd "$_inv_root/batch"; then
    echo "activate.sh: cannot enter $_inv_root/batch"
    unset _inv_from _inv_root _inv_run
    return 1
fi
mkdir -p "$_inv_root/.activate"
if ! python3 - "$(pwd -P)" "$_inv_root" "$_inv_run" <<'PY'
import json
import sys
from pathlib import Path

batch, root, run = sys.argv[1:]
hold = set()
for line in (Path(batch) / "HOLD").read_text(encoding="utf-8").splitlines():
    name = line.split("#", 1)[0].strip()
    if name:
        hold.add(name)
orders = sorted(p.name for p in (Path(batch) / "orders").glob("*.csv") if p.is_file())
files = [f"orders/{n}" for n in orders if n[:-len(".csv")] not in hold]
held = [n[:-len(".csv")] for n in orders if n[:-len(".csv")] in hold]
with open(Path(root) / ".activate" / "activate.jsonl", "a", encoding="utf-8") as fh:
    fh.write(json.dumps({"batch_dir": batch, "root": root, "run_id": run, "var": "INVOICE_RUN",
                         "files": files, "held": held}) + "\n")
print(f"activate: invoice run {run} opened (exported as INVOICE_RUN)")
print(f"activate: entered the batch area {batch}; the invoicing tools run from here")
print(f"activate: this run invoices these {len(files)} order files (paths relative to batch/):")
for f in files:
    print(f"    {f}")
print(f"activate: on hold, not invoiced: {', '.join(held) or 'none'}")
PY
then
    echo "activate.sh: the run could not be opened"
    cd "$_inv_from" || true
    unset _inv_from _inv_root _inv_run
    return 1
fi
export INVOICE_RUN="$_inv_run"
unset _inv_from _inv_root _inv_run
