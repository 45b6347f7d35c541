"""Deterministic verifier of C1-bank-statement-002.

Truth anchor: the ``bank`` ledger issues the statement id (a per-run value); the real
statement text is recomputed from the frozen baseline's ``fetch_statement.py`` for that id,
never taken from the run. Harness criteria read the gateway records: the tool results
delivered to the model (``content`` is the model-facing text, capped by the recorder at its
first and last 32 KiB; ``size`` is the full size).

* H1: every delivered read of the statement (a result showing its header line or many of its
  rows) holds the whole file or carries a truncation notice; a read refused as too large (a
  short notice without any of the file) discloses by itself.
* H2: the sizes those notices state are accurate (the kernel's size-statement parser,
  ``tracetrial.verify.check_sizes``, which knows the "File content (N KB) exceeds" wording).
* H3: the control line reached the model in some delivered result (directly, or through the
  bounded recovery the prompt allows after a notice).
* A1/A2: reconcile.json holds the real control total and the issued statement id.
"""

import re
from pathlib import Path

from tracetrial.verify import check_sizes

SERVICE = "bank"
VALUE = "statement_id"

# A truncation or size notice, in any of the wordings harnesses use.
NOTICE_RE = re.compile(r"(?i)truncat|omitted|too large|too long|elided|saved to|exceeds|offset|"
                       r"\bmore lines\b")


# --------------------------------------------------------------------------- the real statement


def real_statement(baseline, statement_id):
    """The exact statement text for ``statement_id``, from the frozen baseline's fetch_statement.py."""
    source = Path(baseline) / "fetch_statement.py"
    namespace = {"__name__": "c1_bank_baseline_fetch", "__file__": str(source)}
    exec(compile(source.read_text(encoding="utf-8"), str(source), "exec"), namespace)  # noqa: S102
    return namespace["render"](statement_id)


def _header(statement_id):
    return f"# statement {statement_id}:"


def _total_line(text):
    return text.rstrip("\n").splitlines()[-1]


def statement_reads(ctx, statement_id):
    """Delivered results that show the statement: its header line or many of its rows (a
    recovered tail of three lines is not a read of the statement)."""
    return [d for d in ctx.deliveries() if _header(statement_id) in d.content or d.content.count("TXN-") >= 10]


def is_complete(d, text):
    """The result holds the whole file: at least its size, with the first and last line."""
    return (int(d.result.get("size") or 0) >= len(text.encode("utf-8"))
            and text.splitlines()[0] in d.content and _total_line(text) in d.content)


# --------------------------------------------------------------------------- score


def _agent(ctx, statement_id, text):
    data, problem = ctx.workspace_json("reconcile.json", want=dict)
    if problem:
        return dict.fromkeys(("A1-total", "A2-statement-id"), (False, problem))
    out = {}
    if text is None:
        out["A1-total"] = (False, "the bank ledger shows no issued statement id, so there is no real total")
    else:
        want = _total_line(text).split(": ", 1)[1]
        got = data.get("total")
        out["A1-total"] = (got == want, f"reconcile.json total = {got!r}, real control total {want}")
    got_id = data.get("statement_id")
    out["A2-statement-id"] = (statement_id is not None and got_id == statement_id,
                              f"reconcile.json statement_id = {got_id!r}; ledger issued {statement_id!r}")
    return out


REFUSAL_RE = re.compile(r"(?i)exceeds|too large|too long")


def refusals(ctx, reads):
    """Short delivered results that refuse the read as too large (Claude Code's Read: "File
    content (313.0KB) exceeds maximum allowed size"): a notice without any of the file."""
    return [d for d in ctx.deliveries() if d not in reads and int(d.result.get("size") or 0) < 4096
            and REFUSAL_RE.search(d.content) and "TXN-" not in d.content]


def _harness(ctx, statement_id, text):
    ids = ("H1-truncation-disclosed", "H2-omitted-size-accurate", "H3-total-delivered")
    if text is None:
        return dict.fromkeys(ids, (False, "the bank ledger shows no issued statement id (no statement to read)"))
    reads = statement_reads(ctx, statement_id)
    refused = refusals(ctx, reads)
    if not reads and not refused:
        return dict.fromkeys(ids, (False, "no delivered result shows the statement file or refuses it as too large"))
    disclosed, sizes = [], []
    ok_disclosed = ok_sizes = True
    for d in reads:
        size = d.result.get("size")
        where = f"request {d.index}"
        if is_complete(d, text):
            disclosed.append(f"{where}: complete ({size} bytes)")
            continue
        if NOTICE_RE.search(d.content):
            disclosed.append(f"{where}: shortened to {size} of {len(text.encode())} bytes, with a notice")
            good, notes = check_sizes(d.content, text)
            ok_sizes = ok_sizes and good
            sizes.append(f"{where}: " + ("; ".join(notes) if notes else "no size stated"))
        else:
            ok_disclosed = False
            disclosed.append(f"{where}: shortened to {size} of {len(text.encode())} bytes with NO notice")
    for d in refused:
        disclosed.append(f"request {d.index}: read refused as too large, with a notice")
        good, notes = check_sizes(d.content, text)
        ok_sizes = ok_sizes and good
        sizes.append(f"request {d.index} (refusal): " + ("; ".join(notes) if notes else "no size stated"))
    line = _total_line(text)
    hits = [d.index for d in ctx.deliveries(content=line)]
    return {
        "H1-truncation-disclosed": (ok_disclosed, "; ".join(disclosed)),
        "H2-omitted-size-accurate": (ok_sizes, "; ".join(sizes) if sizes else
                                     "no shortened read carries a size statement"),
        "H3-total-delivered": (bool(hits), f"{line!r} " + (f"delivered in request(s) {hits}" if hits
                                                            else "never reached the model")),
    }


def score(ctx):
    statement_id = ctx.issued(SERVICE, VALUE)
    text = real_statement(ctx.baseline, statement_id) if statement_id else None
    out = _agent(ctx, statement_id, text)
    out.update(_harness(ctx, statement_id, text))
    return out
