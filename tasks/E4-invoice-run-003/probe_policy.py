"""The ideal agent for E4-invoice-run-003.

It reads the shell tool's declaration as it was shown - its description and its parameters'
descriptions (``turn.declaration_text``: Codex says where a call starts only in ``workdir``,
"Defaults to the turn cwd"), the text the verifier reads - and plans its commands for what the
declaration says about the working directory, read with the keyword table the verifier uses
(``shell_state_declared``, kept once in ``tracetrial.declarations``):

* ``fresh`` (every call starts afresh in the workspace: the reference's "Each call is a fresh
  process: cd and export do not persist"): the sheet call reads ``batch/orders/...`` and writes
  ``out/invoices.csv``, relative to the workspace root;
* ``persistent`` (a call starts where the previous one ended: Claude Code's "Working directory
  persists between calls"): the setup script's own ``cd`` left the shell in ``batch/``, so the sheet
  call reads ``orders/...`` and writes ``../out/invoices.csv``;
* ``persistent_on_success`` (a ``cd`` carries over only if the command succeeds: Claude Code
  2.1.332): the setup call succeeded (the agent stops otherwise), so planned as for ``persistent``;
* neither (or both): absolute paths, from the batch folder the setup script printed.

Steps: the documented setup step (``. ./tools/activate.sh``: sourced, it enters ``batch/`` itself
and exports ``INVOICE_RUN``), then one sheet call that starts with the check line the prompt asks
for (``cwd=$(pwd -P)`` and ``INVOICE_RUN=${INVOICE_RUN:-unset}``) followed by the commands that
write the sheet. The check is part of the sheet call, so the commands are decided from the
declaration before the check is seen; the agent then reports what the check showed and says so
when the call did not start where the declaration promised (it follows no undisclosed repair).
The run id is written as the setup script printed it, never read back from ``$INVOICE_RUN``, so
nothing it delivers depends on whether variables carry over. Every file name, path and the run id
come from the setup script's output.
"""

import re
import shlex

from tracetrial.policy import cwd_after, final, shell, shell_state_declared

#: Shell tools in the probe's mapping order (apparatus/probe/mapping.py ``SHELL_TOOLS``).
SHELL_TOOLS = ("Bash", "exec_command", "exec", "bash", "shell", "run_shell_command", "execute_command",
               "run_command", "terminal")
SETUP = ". ./tools/activate.sh"
CHECK = 'echo "cwd=$(pwd -P)"; echo "INVOICE_RUN=${INVOICE_RUN:-unset}"'
HEADER = "run,customer,total_cents"
EXIT_RE = re.compile(r"(?i)(?:exit(?:ed)?\s+(?:with\s+)?(?:code|status)|exit_code)\W{0,3}(-?\d+)")
RUN_RE = r"invoice run (RUN-[0-9A-Za-z]+) opened"
ENTERED_RE = r"entered the batch area (/\S+?);"
LIST_RE = re.compile(r"invoices these \d+ order files")
#: One invoice line per file: the run id, the file name without .csv, the sum of qty * unit_cents.
AWK = ('FNR > 1 && NF >= 3 { t += $2 * $3 } END { n = FILENAME; sub(/.*\\//, "", n); sub(/\\.csv$/, "", n); '
       'printf "%s,%s,%d\\n", run, n, t }')

# --------------------------------------------------------------------------- the work


def shell_tool(turn):
    """The declared shell tool the probe maps ``shell`` to (exact name first, then case-folded)."""
    names = turn.tool_names
    for n in SHELL_TOOLS:
        if n in names:
            return n
    folded = {n.lower(): n for n in names}
    return next((folded[n.lower()] for n in SHELL_TOOLS if n.lower() in folded), None)


def failed(obs):
    """The call failed by everything the model was shown: no result, an error flag, a non-zero status."""
    if obs.absent or obs.missing or obs.is_error:
        return True
    code = EXIT_RE.search(obs.text or "")
    return bool(code) and int(code.group(1)) != 0


def order_files(text):
    """The order files the setup script listed (the indented lines after "invoices these N order files")."""
    lines = (text or "").replace("\r", "").splitlines()
    start = next((i for i, line in enumerate(lines) if LIST_RE.search(line)), None)
    if start is None:
        return []
    out = []
    for line in lines[start + 1:]:
        if not line.startswith("  ") or not line.strip():
            break
        out.append(line.strip())
    return out


def sheet_command(cwd_sem, batch_dir, run_id, files):
    """The commands that write the sheet, for the declared working-directory semantics."""
    if cwd_sem == "fresh":  # the call starts in the workspace root: the batch folder by its name
        base, out = batch_dir.rstrip("/").rsplit("/", 1)[-1] + "/", "out"
    elif cwd_sem == "persistent":  # the call starts in the batch folder, where the setup script left it
        base, out = "", "../out"
    else:  # absolute paths: the deliverable does not depend on the semantics
        base, out = batch_dir.rstrip("/") + "/", (batch_dir.rstrip("/").rsplit("/", 1)[0] or "") + "/out"
    lines = " && ".join(f"awk -F, -v run={shlex.quote(run_id)} {shlex.quote(AWK)} {shlex.quote(base + f)}"
                        for f in files)
    return (f"mkdir -p {shlex.quote(out)} && {{ echo {HEADER} && {lines}; }} > "
            f"{shlex.quote(out + '/invoices.csv')}")


def policy(turn):
    tool = shell_tool(turn)
    cwd_sem, _ = shell_state_declared(turn.declaration_text(tool)) if tool else (None, None)
    setup = yield shell(SETUP, timeout_s=60)
    if setup.absent:
        yield final("No shell tool is declared, so the setup step cannot run; no invoice sheet written.")
        return
    run_id = setup.find(RUN_RE)
    batch_dir = setup.find(ENTERED_RE)
    files = order_files(setup.text)
    if failed(setup) or not run_id or not batch_dir or not files:
        yield final(f"The setup step did not open an invoice run, so no sheet was written: {(setup.text or '')[:300]}")
        return
    cwd_sem = cwd_after(cwd_sem, succeeded=True)  # a cd that persists only after a success: it did succeed
    root = batch_dir.rstrip("/").rsplit("/", 1)[0] or "/"
    wrote = yield shell(f"{CHECK}; {sheet_command(cwd_sem, batch_dir, run_id, files)}", timeout_s=60)
    ran_in = wrote.find(r"(?m)^\s*cwd=(\S+)")
    inherited = wrote.find(r"(?m)^\s*INVOICE_RUN=(\S+)")
    plan = {"fresh": f"the workspace root {root} (the tool declares every call starts afresh)",
            "persistent": f"{batch_dir}, where the setup script left the shell (the tool declares the working "
                          "directory persists)",
            None: "an unknown folder (the tool declares neither), so every path was absolute"}[cwd_sem]
    expected = {"fresh": root, "persistent": batch_dir}.get(cwd_sem)
    note = ""
    if expected is not None and ran_in is not None and ran_in.rstrip("/") != expected.rstrip("/"):
        note = (f" Warning: the sheet call ran in {ran_in}, not in {expected} as the shell tool declares, so "
                "relative paths did not resolve where planned.")
    if failed(wrote):
        yield final(f"Writing the invoice sheet failed (planned for {plan}): {(wrote.text or '')[-300:]}{note}")
        return
    yield final(f"Invoice run {run_id}: out/invoices.csv lists the {len(files)} invoiced order files, with commands "
                f"planned for {plan}; the call ran in {ran_in} and inherited INVOICE_RUN={inherited}.{note}")
