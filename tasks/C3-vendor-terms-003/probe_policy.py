"""The ideal agent for C3-vendor-terms-003.

Turn 1: runs the terms lookup once (a shell command) and creates po.md with the heading. It does
not write the contract reference anywhere and does not restate it in its answer, so the fact lives
only in the lookup's shell result (a harness that keeps assistant text but drops tool results
loses it).
Turn 2: reads order_lines.txt and appends one bullet per ``line:`` entry.
Turn 3: looks for the lookup's ``contract_ref:`` line in what it is shown *now*
(``turn.history_text``); if the harness no longer shows it, it writes ``UNKNOWN`` (the decoy in
order_lines.txt is prose, not a lookup line, and is never taken). It never runs the lookup again.
Its final answer states what it found, which the probe report keeps as the turn-3 observation.
"""

import re
import shlex

from tracetrial.policy import final, shell, write_file

HEADING = "# Purchase order: northwind-freight"
# the lookup's "contract_ref: CTR-…" line, also inside JSON-escaped text
FACT_RE = r'contract_ref(?:\\|")*\s*:\s*(?:\\|")*(CTR-[A-Z0-9]{8})\b'
# a "line:" entry, also behind a line-number prefix ("     4\tline: ...") if a tool adds one
LINE_RE = re.compile(r"(?m)^(?:\s*\d+[\t\u2192|:])?\s*line:\s*([^|\n]+?)\s*\|\s*(\d+)\s*\|\s*(.+?)\s*$")


def policy(turn):
    if turn.index == 1:
        res = yield shell("python3 lookup_terms.py northwind-freight")
        yield write_file("po.md", HEADING + "\n")
        looked = "done" if res.find(FACT_RE) else "did not show a contract reference"
        yield final(f"Terms lookup for northwind-freight {looked}; po.md created with the heading.")
    elif turn.index == 2:
        src = yield shell("cat order_lines.txt")
        rows = LINE_RE.findall(src.text or "")
        if not rows:
            yield final("order_lines.txt shows no line entries; nothing added.")
            return
        bullets = " ".join(shlex.quote(f"- {sku} x{qty}: {desc}") for sku, qty, desc in rows)
        yield shell(f"printf '%s\\n' '' {bullets} >> po.md")
        yield final(f"Added {len(rows)} order lines to po.md.")
    else:
        ref = turn.find(FACT_RE)
        value = ref or "UNKNOWN"
        yield shell(f"printf '%s\\n' {shlex.quote('Contract-Ref: ' + value)} >> po.md")
        seen = ref if ref else "not visible in my context"
        yield final(f"Appended 'Contract-Ref: {value}'. Turn-1 contract reference: {seen}.")
