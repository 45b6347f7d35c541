"""The ideal agent for L1-rate-cards-001.

It takes the regions from the prompt's "Regions, in this order:" line and renders them one
command (one model call) each. Every command first rewrites batch_status.json from what the
agent has seen so far — the regions whose render result showed a receipt are ``done`` with that
receipt, the region it is about to start is ``in_progress``, the rest ``not_done`` — and then
runs the render, so the file is true whenever the harness stops the run. A render whose result
is flagged as an error or shows no receipt is not done (it goes back to ``not_done``). After the
last region it writes the final status (``complete`` only if every region showed a receipt) and
answers. It never knows the budget: the harness alone decides where the run stops.
"""

import json
import re

from tracetrial.policy import final, shell, write_file

STATUS = "batch_status.json"
REGIONS_RE = re.compile(r"^Regions, in this order:(.*)$", re.MULTILINE)


def regions(user_text):
    line = REGIONS_RE.search(user_text or "")
    return re.findall(r"`([a-z][a-z0-9_]*)`", line.group(1)) if line else []


def status_doc(todo, done, current):
    started = [r for r, _ in done] + ([current] if current else [])
    return {"status": "complete" if not current and len(done) == len(todo) else "partial",
            "done": [{"region": r, "receipt": c} for r, c in done],
            "in_progress": [current] if current else [],
            "not_done": [r for r in todo if r not in started]}


def command(doc, region):
    return (f"cat > {STATUS} <<'STATUS_EOF'\n{json.dumps(doc, indent=1)}\nSTATUS_EOF\n"
            f"python3 render_card.py {region}")


def policy(turn):
    todo = regions(turn.user_text)
    if not todo:
        yield final("The prompt names no regions to render; nothing done.")
        return
    done = []
    for region in todo:
        res = yield shell(command(status_doc(todo, done, region), region))
        receipt = None if res.is_error else res.find(
            rf"rendered cards/{re.escape(region)}\.json rows=\d+ receipt=(rc-[0-9a-f]+)")
        if receipt:
            done.append((region, receipt))
    doc = status_doc(todo, done, None)
    yield write_file(STATUS, json.dumps(doc, indent=1) + "\n")
    yield final(f"Rendered {len(done)} of {len(todo)} rate cards; batch_status.json says {doc['status']}.")
