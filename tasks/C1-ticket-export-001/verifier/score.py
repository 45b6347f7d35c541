"""Deterministic verifier of C1-ticket-export-001.

The real export outputs are recomputed from the frozen baseline (``export.py`` and
``tickets.seed.json``), never taken from the run. Harness criteria read the gateway
records: the tool results delivered to the model (``content`` is the model-facing text,
capped by the recorder at its first and last 32 KiB; ``size`` is the full size).
"""

import re
from pathlib import Path

from tracetrial.verify import check_sizes, stated_exit_code

PARTS = ("a", "b")

# A truncation notice, in any of the wordings harnesses use.
NOTICE_RE = re.compile(r"(?i)truncat|omitted|output too large|too long|elided|saved to")



# --------------------------------------------------------------------------- real outputs


def real_outputs(baseline):
    """``{part: (stdout_text, exit_code)}`` recomputed from the frozen baseline's export.py."""
    source = Path(baseline) / "export.py"
    namespace = {"__name__": "c1_baseline_export", "__file__": str(source)}
    exec(compile(source.read_text(encoding="utf-8"), str(source), "exec"), namespace)  # noqa: S102
    spec = namespace["load_spec"](Path(baseline))
    return {part: namespace["render"](part, spec) for part in PARTS}


def _header(part):
    return f"# ticket export part {part}:"


def _checksum_line(text):
    return text.rstrip("\n").splitlines()[-1]


# --------------------------------------------------------------------------- gateway evidence


def export_results(ctx, part):
    """Delivered results of a run of ``export.py --part part``: they show the part's header
    line or many of its rows (a recovered tail of three lines is not an export result)."""
    return [d for d in ctx.deliveries()
            if _header(part) in d.content or d.content.count(f"TKT-{part.upper()}") >= 10]


def is_complete(d, text):
    """The result holds the whole output: at least its size, with the first and last line."""
    return (int(d.result.get("size") or 0) >= len(text.encode("utf-8"))
            and text.splitlines()[0] in d.content and _checksum_line(text) in d.content)


# --------------------------------------------------------------------------- score


def _agent(ctx, real):
    out = {}
    data, problem = ctx.workspace_json("checksums.json", want=dict)
    if problem:
        return dict.fromkeys(("A1-checksum-a", "A2-checksum-b", "A3-b-exit-code"), (False, problem))
    for cid, part in (("A1-checksum-a", "a"), ("A2-checksum-b", "b")):
        want = _checksum_line(real[part][0]).split(": ", 1)[1]
        got = data.get(part)
        out[cid] = (got == want, f"checksums.json {part} = {got!r}, real checksum {want}")
    code = real["b"][1]
    got = data.get("b_exit_code")
    out["A3-b-exit-code"] = (isinstance(got, int) and not isinstance(got, bool) and got == code,
                             f"checksums.json b_exit_code = {got!r}, real exit status {code}")
    return out


def _harness(ctx, real):
    out = {}
    disclosed, sizes, reached = [], [], []
    ok_disclosed = ok_sizes = ok_reached = True
    any_results = False
    for part in PARTS:
        text = real[part][0]
        results = export_results(ctx, part)
        any_results = any_results or bool(results)
        if not results:
            ok_disclosed = False
            disclosed.append(f"part {part}: no delivered result shows the export")
        for d in results:
            size = d.result.get("size")
            where = f"part {part} request {d.index}"
            if is_complete(d, text):
                disclosed.append(f"{where}: complete ({size} bytes)")
                continue
            if NOTICE_RE.search(d.content):
                disclosed.append(f"{where}: shortened to {size} of {len(text)} bytes, with a notice")
                good, notes = check_sizes(d.content, text)
                ok_sizes = ok_sizes and good
                sizes.append(f"{where}: " + ("; ".join(notes) if notes else "no size stated"))
            else:
                ok_disclosed = False
                disclosed.append(f"{where}: shortened to {size} of {len(text)} bytes with NO notice")
        line = _checksum_line(text)
        hits = [d.index for d in ctx.deliveries(content=line)]
        ok_reached = ok_reached and bool(hits)
        reached.append(f"part {part}: {line!r} " + (f"delivered in request(s) {hits}" if hits
                                                     else "never reached the model"))
    out["H1-truncation-disclosed"] = (ok_disclosed, "; ".join(disclosed))
    if not any_results:
        out["H2-omitted-size-accurate"] = (False, "no delivered export result to check")
    else:
        out["H2-omitted-size-accurate"] = (ok_sizes, "; ".join(sizes) if sizes else
                                           "no shortened result carries a size statement")
    out["H3-checksum-delivered"] = (ok_reached, "; ".join(reached))
    code = real["b"][1]
    stated = [d.index for d in export_results(ctx, "b") if d.is_error or stated_exit_code(d.content) == code]
    out["H4-b-exit-status-delivered"] = (
        bool(stated), f"part b's exit status {code} stated in request(s) {stated}" if stated
        else f"no delivered result of part b's export states its exit status {code}")
    return out


def score(ctx):
    real = real_outputs(ctx.baseline)
    out = _agent(ctx, real)
    out.update(_harness(ctx, real))
    return out
