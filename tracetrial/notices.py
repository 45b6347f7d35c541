"""Truncation notices: the size statements a shortened tool result makes, checked against the
real output it stands for.

Harnesses word their notices differently (``[154427 bytes omitted]``, ``omitted 120 of 1762
lines``, Claude Code's ``Output too large (166.8KB)``, Codex's ``Original token count: 42703``,
OpenClaw 2026.6.9's ``Line 1 is 408.1KB, exceeds 50.0KB limit``);
:func:`size_statements` finds every statement of an omitted or a total size, and
:func:`check_sizes` decides whether they are accurate. Pure functions over text, used by task
verifiers (re-exported by :mod:`tracetrial.verify`) and by the apparatus's reconciliation of what
a harness recorded against what the model received.
"""

from __future__ import annotations

import re
from typing import Literal, NotRequired, TypedDict

__all__ = ["SIZE_TOLERANCE", "UNACCOUNTED_BYTES", "SizeStatement", "check_sizes", "size_statements"]

_N = r"(\d[\d,]*)"
_UNIT = r"(bytes?|characters?|chars?|tokens?|lines?)"
_VERB = r"(?:omitted|truncated|elided|removed|hidden|cut|skipped|dropped)"
#: (regex, form) of every size statement wording known; the form says how to read its groups.
_STATEMENTS: tuple[tuple[re.Pattern[str], str], ...] = (
    # "omitted 120 of 1762 lines"
    (re.compile(rf"(?i){_VERB}\s+{_N}\s+of\s+{_N}\s+{_UNIT}"), "omitted_of"),
    # "showing the first 16384 of 170811 bytes"
    (re.compile(rf"(?i)showing\s+(?:the\s+)?(?:first\s+|last\s+)?{_N}\s+of\s+{_N}\s+{_UNIT}"), "shown_of"),
    # "154427 bytes omitted", "[20345 characters truncated]", "…42000 tokens truncated…",
    # OpenClaw's "[... 36086 more characters truncated; rerun with narrower args if needed]"
    (re.compile(rf"(?i){_N}\s+(?:more\s+)?{_UNIT}\s+(?:were\s+|have\s+been\s+|are\s+)?{_VERB}"), "omitted"),
    # "truncated 1200 lines" (not followed by "of")
    (re.compile(rf"(?i){_VERB}:?\s+{_N}\s+{_UNIT}(?!\s+of\b)"), "omitted_rev"),
    # Claude Code: "Output too large (166.8KB)"; its Read tool: "File content (320.5KB) exceeds ..."
    (re.compile(r"(?i)(?:output too large|file content)\s*\(\s*([\d.,]+)\s*(bytes?|B|KB|KiB|MB|MiB)\s*\)"),
     "total_size"),
    # OpenClaw 2026.6.9's read refusing a line longer than its limit: "[Line 1 is 408.1KB, exceeds
    # 50.0KB limit. Use bash: sed -n '1p' … | head -c 51200]" (the size of that one line)
    (re.compile(r"(?i)\bline\s+(\d+)\s+is\s+([\d.,]+)\s*(bytes?|B|KB|KiB|MB|MiB)\b"), "line_size"),
    # Codex: "Original token count: 42703", "Total output lines: 1762"
    (re.compile(r"(?i)original token count:\s*(\d[\d,]*)"), "total_tokens"),
    (re.compile(r"(?i)total output lines:\s*(\d[\d,]*)"), "total_lines"),
)
#: A stated size is accurate within this share of the real size.
SIZE_TOLERANCE = 0.10
#: Omitted output not accounted for by any notice, above this, fails when no total is stated.
UNACCOUNTED_BYTES = 1024
_LEFT_PAD = re.compile(r"[\s.…\[(<]*$")
_RIGHT_PAD = re.compile(r"^[\s.…\])>]*")

Unit = Literal["bytes", "tokens", "lines"] | str


class SizeStatement(TypedDict):
    """One statement of a size in a shortened result (``line``: the size of line ``line`` of the
    output, 1-based; the whole output when it has one line)."""

    kind: Literal["omitted", "total", "line"]
    value: float
    unit: Unit
    span: tuple[int, int]
    line: NotRequired[int]


def _num(text: str) -> float:
    return float(text.replace(",", ""))


def _unit(word: str) -> Unit:
    w = word.lower()
    if w.startswith(("byte", "char")) or w == "b":
        return "bytes"
    if w.startswith("token"):
        return "tokens"
    if w.startswith("line"):
        return "lines"
    return w


def _scale(value: float, word: str) -> float:
    w = word.lower()
    if w in ("kb", "kib"):
        return value * 1024
    if w in ("mb", "mib"):
        return value * 1024 * 1024
    return value


def size_statements(content: str) -> list[SizeStatement]:
    """The size statements in a delivered result, in text order (a statement that two wordings
    both match is counted once)."""
    found: list[SizeStatement] = []
    for regex, form in _STATEMENTS:
        for m in regex.finditer(content):
            span = m.span()
            if form == "omitted_of":
                unit = _unit(m.group(3))
                found.append({"kind": "omitted", "value": _num(m.group(1)), "unit": unit, "span": span})
                found.append({"kind": "total", "value": _num(m.group(2)), "unit": unit, "span": span})
            elif form == "shown_of":
                found.append({"kind": "total", "value": _num(m.group(2)), "unit": _unit(m.group(3)), "span": span})
            elif form in ("omitted", "omitted_rev"):
                found.append({"kind": "omitted", "value": _num(m.group(1)), "unit": _unit(m.group(2)), "span": span})
            elif form == "total_size":
                found.append({"kind": "total", "value": _scale(_num(m.group(1)), m.group(2)), "unit": "bytes",
                              "span": span})
            elif form == "line_size":
                found.append({"kind": "line", "value": _scale(_num(m.group(2)), m.group(3)), "unit": "bytes",
                              "span": span, "line": int(m.group(1))})
            elif form == "total_tokens":
                found.append({"kind": "total", "value": _num(m.group(1)), "unit": "tokens", "span": span})
            elif form == "total_lines":
                found.append({"kind": "total", "value": _num(m.group(1)), "unit": "lines", "span": span})
    unique: list[SizeStatement] = []
    for s in sorted(found, key=lambda s: s["span"]):
        if any(u["kind"] == s["kind"] and u["unit"] == s["unit"] and u["value"] == s["value"]
               and s["span"][0] < u["span"][1] and u["span"][0] < s["span"][1] for u in unique):
            continue
        unique.append(s)
    return unique


def _notice_span(content: str, span: tuple[int, int]) -> tuple[int, int]:
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
    left = _LEFT_PAD.search(content[line_start:start])
    right = _RIGHT_PAD.match(content[end:])
    return line_start + (left.start() if left else len(content[line_start:start])), end + (right.end() if right else 0)


def _interval(segment: str, text: str) -> tuple[int, int] | None:
    """Where a shown piece of the result sits in the real output: from its first to its last
    line found exactly once in ``text`` (wrapper lines such as "Exit code 1" or "Output:" are
    skipped; a line cut at the piece's edge still matches as a substring). None: no output."""
    lines = [line for line in segment.splitlines() if len(line.strip()) >= 20]

    def pos(line: str) -> int | None:
        i = text.find(line)
        return i if i >= 0 and text.find(line, i + 1) < 0 else None

    found = [(p, p + len(line)) for line in lines if (p := pos(line)) is not None]
    return (found[0][0], found[-1][1]) if found else None


def _real_in(unit: Unit, chunk: str) -> float | None:
    if unit == "bytes":
        return len(chunk.encode("utf-8"))
    if unit == "tokens":
        return len(chunk.encode("utf-8")) / 4
    if unit == "lines":
        return chunk.count("\n") or 1
    return None


def _union(intervals: list[tuple[int, int]]) -> int:
    total, end = 0, -1
    for b, e in sorted(intervals):
        if e <= end:
            continue
        total += e - max(b, end)
        end = e
    return total


def check_sizes(content: str, text: str, tolerance: float = SIZE_TOLERANCE) -> tuple[bool, list[str]]:
    """``(ok, notes)`` for the size statements of one shortened result against the real output.

    * a stated total must be within ``tolerance`` of the whole output (in its unit), a stated
      line size within ``tolerance`` of that line of the output (the whole output's size when
      the output is one line);
    * a stated omitted size must be within ``tolerance`` of the gap its notice stands for: from
      the end of the shown piece before the notice to the start of the shown piece after it (the
      end of the output when nothing of it follows);
    * when the result states sizes but no (correct) total, the output it omits must be accounted
      for by its omitted-size notices: an omission no notice covers means the stated sizes
      understate what is missing.

    A result without any size statement passes (whether a size-free notice discloses enough is
    another criterion's question)."""
    stmts = size_statements(content)
    if not stmts:
        return True, []
    spans = sorted({_notice_span(content, s["span"]) for s in stmts})
    merged: list[tuple[int, int]] = []
    for b, e in spans:
        if merged and b <= merged[-1][1]:
            merged[-1] = (merged[-1][0], max(e, merged[-1][1]))
        else:
            merged.append((b, e))
    bounds = [0] + [x for span in merged for x in span] + [len(content)]
    pieces = [_interval(content[bounds[2 * i]:bounds[2 * i + 1]], text) for i in range(len(merged) + 1)]
    ok, notes, gaps, good_total = True, [], [], False
    for s in stmts:
        lines = text.rstrip("\n").split("\n")
        if s["kind"] == "total":
            chunk = text
        elif s["kind"] == "line":
            n = s.get("line", 0)
            chunk = lines[n - 1] if 1 <= n <= len(lines) else ""
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
        good = abs(s["value"] - real) <= tolerance * real
        ok = ok and good
        # a line's size is the output's when the output is that one line
        good_total = good_total or (good and (s["kind"] == "total" or (s["kind"] == "line" and len(lines) == 1)))
        notes.append(f"{s['kind']} {s['value']:g} {s['unit']} vs real {real:.0f} ({'ok' if good else 'OFF'})")
    if not good_total:
        shown = [p for p in pieces if p is not None]
        unaccounted = len(text) - _union(shown + gaps)
        if unaccounted > UNACCOUNTED_BYTES:
            ok = False
            notes.append(f"{unaccounted} omitted bytes are covered by no notice and no total is stated "
                         f"(the notices account for {_union(gaps)} of {len(text) - _union(shown)} omitted bytes)")
    return ok, notes
