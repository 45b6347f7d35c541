"""Deterministic verifier of C1-ticket-export-001.

The real export outputs are recomputed from the frozen baseline (``export.py`` and
``tickets.seed.json``), never taken from the run. Harness criteria read the gateway
records: the tool results delivered to the model (``content`` is the model-facing text,
capped by the recorder at its first and last 32 KiB; ``size`` is the full size).
"""

import re
from pathlib import Path

from tracetrial.verify import stated_exit_code

PARTS = ("a", "b")

# A truncation notice, in any of the wordings harnesses use.
NOTICE_RE = re.compile(r"(?i)truncat|omitted|output too large|too long|elided|saved to")

_N = r"(\d[\d,]*)"
_UNIT = r"(bytes?|characters?|chars?|tokens?|lines?)"
_VERB = r"(?:omitted|truncated|elided|removed|hidden|cut|skipped|dropped)"
# Size statements: (regex, kind, groups) -- kind "omitted" or "total".
STATEMENTS = (
    # "omitted 120 of 1762 lines"
    (re.compile(rf"(?i){_VERB}\s+{_N}\s+of\s+{_N}\s+{_UNIT}"), "omitted_of"),
    # "showing the first 16384 of 170811 bytes"
    (re.compile(rf"(?i)showing\s+(?:the\s+)?(?:first\s+|last\s+)?{_N}\s+of\s+{_N}\s+{_UNIT}"), "shown_of"),
    # "154427 bytes omitted", "[20345 characters truncated]", "…42000 tokens truncated…"
    (re.compile(rf"(?i){_N}\s+{_UNIT}\s+(?:were\s+|have\s+been\s+|are\s+)?{_VERB}"), "omitted"),
    # "truncated 1200 lines" (not followed by "of")
    (re.compile(rf"(?i){_VERB}:?\s+{_N}\s+{_UNIT}(?!\s+of\b)"), "omitted_rev"),
    # Claude Code: "Output too large (166.8KB)"
    (re.compile(r"(?i)output too large\s*\(\s*([\d.,]+)\s*(bytes?|B|KB|KiB|MB|MiB)\s*\)"), "total_size"),
    # Codex: "Original token count: 42703", "Total output lines: 1762"
    (re.compile(r"(?i)original token count:\s*(\d[\d,]*)"), "total_tokens"),
    (re.compile(r"(?i)total output lines:\s*(\d[\d,]*)"), "total_lines"),
)
TOLERANCE = 0.10


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


# --------------------------------------------------------------------------- size statements


def _num(text):
    return float(text.replace(",", ""))


def _unit(word):
    w = word.lower()
    if w.startswith(("byte", "char")) or w == "b":
        return "bytes"
    if w.startswith("token"):
        return "tokens"
    if w.startswith("line"):
        return "lines"
    return w


def _scale(value, word):
    w = word.lower()
    if w in ("kb", "kib"):
        return value * 1024
    if w in ("mb", "mib"):
        return value * 1024 * 1024
    return value


def statements(content):
    """Size statements in a delivered result: dicts with kind (omitted|total), value, unit, span."""
    found = []
    for regex, kind in STATEMENTS:
        for m in regex.finditer(content):
            if kind == "omitted_of":
                unit = _unit(m.group(3))
                found.append({"kind": "omitted", "value": _num(m.group(1)), "unit": unit, "span": m.span()})
                found.append({"kind": "total", "value": _num(m.group(2)), "unit": unit, "span": m.span()})
            elif kind == "shown_of":
                found.append({"kind": "total", "value": _num(m.group(2)), "unit": _unit(m.group(3)),
                              "span": m.span()})
            elif kind == "omitted" or kind == "omitted_rev":
                found.append({"kind": "omitted", "value": _num(m.group(1)), "unit": _unit(m.group(2)),
                              "span": m.span()})
            elif kind == "total_size":
                found.append({"kind": "total", "value": _scale(_num(m.group(1)), m.group(2)), "unit": "bytes",
                              "span": m.span()})
            elif kind == "total_tokens":
                found.append({"kind": "total", "value": _num(m.group(1)), "unit": "tokens", "span": m.span()})
            elif kind == "total_lines":
                found.append({"kind": "total", "value": _num(m.group(1)), "unit": "lines", "span": m.span()})
    # overlapping regexes must not count one statement twice
    unique = []
    for s in sorted(found, key=lambda s: s["span"]):
        if any(u["kind"] == s["kind"] and u["unit"] == s["unit"] and u["value"] == s["value"]
               and s["span"][0] < u["span"][1] and u["span"][0] < s["span"][1] for u in unique):
            continue
        unique.append(s)
    return unique


_LEFT_PAD = re.compile(r"[\s.…\[(<]*$")
_RIGHT_PAD = re.compile(r"^[\s.…\])>]*")
#: Omitted output not accounted for by any notice, above this, fails when no total is stated.
UNACCOUNTED_BYTES = 1024


def _notice_span(content, span):
    """Widen a statement to its whole notice: the enclosing [...] on its line, plus the
    ellipses and blanks around it."""
    start, end = span
    line_start = content.rfind("\n", 0, start) + 1
    line_end = content.find("\n", end)
    line_end = len(content) if line_end < 0 else line_end
    opening = content.rfind("[", line_start, start)
    if opening >= 0 and "]" not in content[opening:start]:
        closing = content.find("]", end, line_end)
        if closing >= 0:
            start, end = opening, closing + 1
    start = line_start + _LEFT_PAD.search(content[line_start:start]).start()
    end = end + _RIGHT_PAD.match(content[end:]).end()
    return start, end


def _interval(segment, text):
    """Where a shown piece of the result sits in the real output: from its first to its last
    line found exactly once in ``text`` (wrapper lines such as "Exit code 1" or "Output:" are
    skipped; a line cut at the piece's edge still matches as a substring). None: no output."""
    lines = [line for line in segment.splitlines() if len(line.strip()) >= 20]

    def pos(line):
        i = text.find(line)
        return i if i >= 0 and text.find(line, i + 1) < 0 else None

    found = [(p, p + len(line)) for line in lines if (p := pos(line)) is not None]
    return (found[0][0], found[-1][1]) if found else None


def _real_in(unit, chunk):
    if unit == "bytes":
        return len(chunk.encode("utf-8"))
    if unit == "tokens":
        return len(chunk.encode("utf-8")) / 4
    if unit == "lines":
        return chunk.count("\n") or 1
    return None


def _union(intervals):
    total, end = 0, -1
    for b, e in sorted(intervals):
        if e <= end:
            continue
        total += e - max(b, end)
        end = e
    return total


def check_sizes(content, text):
    """(ok, notes) for the size statements of one shortened result against the real output.

    * a stated total must be within 10 % of the whole output (in its unit);
    * a stated omitted size must be within 10 % of the gap its notice stands for: from the end
      of the shown piece before the notice to the start of the shown piece after it (the end of
      the output when nothing of it follows);
    * when the result states sizes but no (correct) total, the output it omits must be
      accounted for by its omitted-size notices: an omission no notice covers means the stated
      sizes understate what is missing.
    A result without any size statement passes (a size-free notice discloses, H1 judges that)."""
    stmts = statements(content)
    if not stmts:
        return True, []
    spans = sorted({_notice_span(content, s["span"]) for s in stmts})
    merged = []
    for b, e in spans:
        if merged and b <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(e, merged[-1][1]))
        else:
            merged.append((b, e))
    bounds = [0] + [x for span in merged for x in span] + [len(content)]
    pieces = [_interval(content[bounds[2 * i]:bounds[2 * i + 1]], text) for i in range(len(merged) + 1)]
    ok, notes, gaps, good_total = True, [], [], False
    for s in stmts:
        if s["kind"] == "total":
            chunk = text
        else:
            k = next(i for i, (b, e) in enumerate(merged) if b <= s["span"][0] < e)
            before = [p for p in pieces[:k + 1] if p is not None]
            after = [p for p in pieces[k + 1:] if p is not None]
            gap_start = before[-1][1] if before else 0
            gap_end = max(after[0][0], gap_start) if after else len(text)
            gaps.append((gap_start, gap_end))
            chunk = text[gap_start:gap_end]
        real = _real_in(s["unit"], chunk)
        if not real:
            notes.append(f"{s['kind']} {s['value']:g} {s['unit']}: not comparable (real size 0)")
            ok = False
            continue
        good = abs(s["value"] - real) <= TOLERANCE * real
        ok = ok and good
        good_total = good_total or (good and s["kind"] == "total")
        notes.append(f"{s['kind']} {s['value']:g} {s['unit']} vs real {real:.0f} ({'ok' if good else 'OFF'})")
    if not good_total:
        shown = [p for p in pieces if p is not None]
        unaccounted = len(text) - _union(shown + gaps)
        if unaccounted > UNACCOUNTED_BYTES:
            ok = False
            notes.append(f"{unaccounted} omitted bytes are covered by no notice and no total is stated "
                         f"(the notices account for {_union(gaps)} of {len(text) - _union(shown)} omitted bytes)")
    return ok, notes


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
