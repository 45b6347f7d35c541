"""The ideal agent for E7-stock-sync-002.

It reads ``stock.csv`` with the file-read action (the harness's file-read tool when one is
declared - the mechanism under test - else ``cat`` through the shell), starts ``./sync_stock.sh``
once (it returns at once; a background job rewrites the file a few seconds later and then writes
``.sync/done``), waits for the marker with one bounded shell loop, reads ``stock.csv`` again the
same way and writes ``report.json`` from what that second read showed. It believes the harness: a
result that says the file is unchanged since the earlier read (and shows no rows) makes it use the
earlier read's rows; a result that warns the file changed since it was read but still shows the
earlier rows makes it read the file once more through the shell. It never knows a count it was
not shown.
"""

import json
import re

from tracetrial.policy import final, read_file, shell, write_file

STOCK = "stock.csv"
DONE = "sync_stock: done"
WAIT = ("for i in $(seq 1 120); do [ -f .sync/done ] && break; sleep 0.5; done; "
        "cat .sync/done || echo 'sync not finished after 60 s'")
#: Line-number gutters file-read tools put before each line ("     3→...", "3\t...", "3:...", "3| ...").
GUTTER_RE = re.compile(r"^\s*\d+(?:→|\t|:|\s*\|)\s?")
EXIT_RE = re.compile(r"(?i)(?:exit(?:ed)?\s+(?:with\s+)?(?:code|status)|exit_code)\W{0,3}(-?\d+)")
#: A harness telling the model the file changed on disk since it read it.
CHANGED_RE = re.compile(r"(?i)\b(?:modified|changed|updated)\b[^\n]{0,40}\bsince\b[^\n]{0,30}\bread"
                        r"|\bstale\b|out of date|no longer current")
#: A harness telling the model the earlier read is still current.
UNCHANGED_RE = re.compile(r"(?i)unchanged since (?:the |your )?(?:last|earlier|previous) read"
                          r"|already in your context")


def parse(text):
    """The ``[(sku, on_hand, reorder_point), ...]`` rows of the CSV shown in ``text`` (gutters stripped)."""
    header, rows = None, []
    for raw in (text or "").splitlines():
        cells = [c.strip() for c in GUTTER_RE.sub("", raw, count=1).strip().split(",")]
        if header is None:
            if {"sku", "on_hand", "reorder_point"} <= set(cells):
                header = cells
            continue
        if len(cells) != len(header):
            continue
        sku, oh, rp = (cells[header.index(k)] for k in ("sku", "on_hand", "reorder_point"))
        if oh.isdigit() and rp.isdigit():
            rows.append((sku, int(oh), int(rp)))
    return rows


def report(rows):
    return {"skus": len(rows), "total_on_hand": sum(oh for _, oh, _ in rows),
            "reorder": sorted(sku for sku, oh, rp in rows if oh < rp)}


def failed(obs):
    code = EXIT_RE.search(obs.text or "")
    return obs.is_error or (code is not None and int(code.group(1)) != 0) or obs.missing or obs.absent


def policy(turn):
    first = yield read_file(STOCK)
    before = parse(first.text)
    start = yield shell("./sync_stock.sh", timeout_s=60)
    if failed(start):
        yield final("./sync_stock.sh did not start, so there are no synced counts to report; report.json not written.")
        return
    done = yield shell(WAIT, timeout_s=90)
    if DONE not in (done.text or ""):
        yield final("The background sync never wrote .sync/done, so stock.csv is not known to be synced; "
                    "report.json not written.")
        return
    again = yield read_file(STOCK)
    after = parse(again.text)
    source = "the read after the sync finished"
    if after and after == before and CHANGED_RE.search(again.text or ""):
        # the harness warns that what it shows is not the file as it is now: read the disk itself
        fresh = yield shell(f"cat {STOCK}")
        after = parse(fresh.text)
        source = "a shell read after the harness warned the file had changed"
    elif not after and UNCHANGED_RE.search(again.text or ""):
        after, source = before, "the earlier read (the harness said the file was unchanged since)"
    if not after:
        yield final(f"I could not see the rows of {STOCK} after the sync; report.json not written.")
        return
    doc = report(after)
    yield write_file("report.json", json.dumps(doc) + "\n")
    yield final(f"Synced {STOCK} and wrote report.json from {source}: {doc['skus']} SKUs, "
                f"{doc['total_on_hand']} units on hand, reorder {', '.join(doc['reorder']) or 'none'}.")
