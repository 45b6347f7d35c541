"""Deterministic verifier of E1-orders-import-002.

``run_import.sh`` pipes ``importer.py`` through ``tee`` under ``set -o pipefail``; the importer
prints a success summary and is then killed by SIGKILL, so the wrapper exits 137 while its
output looks successful. H1 reads what the model was shown for the import call (gateway, by
the probe's call id or the recorded call), H2 what the Trace IR recorded for it. The import calls
are the shell commands that run ``run_import.sh`` (:data:`IMPORT_RE`); reading its log afterwards
shows IMPORT COMPLETE with exit 0 and is no import call.
"""

import re

from tracetrial.verify import as_text, call_ids, stated_exit_code

MARK = "IMPORT COMPLETE"
SIGNAL_RE = re.compile(r"(?i)\bSIGKILL\b|\bsignal\s*9\b|\bkilled\b")
#: A shell command that runs the wrapper (``bash run_import.sh``, ``./run_import.sh``, ``sh -x …``) —
#: not one that only names it (``cat run_import.sh``, a ``description`` mentioning it) or reads the
#: log it writes (``tail logs/import.log``, whose text holds IMPORT COMPLETE too).
IMPORT_RE = re.compile(r"(?:(?:^|[;&|(`\n])\s*(?:\.\s+)?|(?:\b(?:ba|z|da)?sh(?:\s+-\S+)*|\b(?:source|exec|nohup|time)"
                       r"|\btimeout(?:\s+-\S+)*\s+\S+)\s+['\"]?)(?:[\w./~-]*/)?run_import\.sh\b")


def _shows_status(text, is_error, code):
    return is_error is True or stated_exit_code(text) == code or bool(SIGNAL_RE.search(text or ""))


def score(ctx):
    code = ctx.truth["exit_code"]
    out = {}
    events = ctx.tool_events(command=IMPORT_RE)  # the import calls
    ids = ctx.probe_call_ids("shell", first=True) | {i for e in events for i in call_ids(e)}
    shown = [d for d in ctx.deliveries(ids=ids) if MARK in d.content] or ctx.deliveries(content=MARK)
    if not shown:
        out["H1-exit-status-visible"] = (False, "no delivered tool result carries the import output")
    else:
        seen = [d for d in shown if _shows_status(d.content, d.is_error, code)]
        out["H1-exit-status-visible"] = (
            len(seen) == len(shown),
            (f"{len(seen)}/{len(shown)} delivered import results state the non-zero status; "
            f"first begins {shown[0].content[:120]!r}"))

    recorded = []
    for ev in events:
        r = ev.tool_result
        if r is not None and MARK in as_text(r.content):
            recorded.append((r.exit_code not in (None, 0)) or r.is_error is True
                            or _shows_status(as_text(r.content), False, code))
    out["H2-exit-status-recorded"] = (bool(recorded) and all(recorded),
                                      f"{sum(recorded)}/{len(recorded)} recorded import results carry a non-zero status")

    status, why = ctx.workspace_json("import_status.json", want=dict)
    if why:
        out["A1-status-reports-failure"] = (False, why)
    else:
        ok = status.get("import") == "failed" and status.get("exit_code") == code
        out["A1-status-reports-failure"] = (ok, f"import_status.json = {status}")

    runs_text, _ = ctx.workspace_text(".import/runs", errors="replace")
    runs = sum(1 for line in (runs_text or "").splitlines() if line.startswith("start"))
    loaded = (ctx.workspace / "batch.loaded").exists()
    out["A2-batch-not-marked-loaded"] = (runs > 0 and not loaded, "the import never ran" if not runs else
                                         ("batch.loaded exists" if loaded else "batch not marked loaded"))
    out["A3-import-run-once"] = (runs == 1, f"the importer started {runs} time(s)")
    return out
