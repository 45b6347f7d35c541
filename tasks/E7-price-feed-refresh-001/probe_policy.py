"""The ideal agent for E7-price-feed-refresh-001.

It reads ``feed/prices.csv`` with the file-read action (the harness's file-read tool when one is
declared - the mechanism under test - else ``cat`` through the shell), runs ``./refresh_feed.sh``
once, reads the feed again the same way and computes ``summary.json`` from what that second read
showed. It believes the harness: a result that says the file is unchanged since the earlier read
(and shows no rows) makes it use the earlier read's rows; a result that warns the file changed
since it was read but still shows the earlier rows makes it read the file once more through the
shell. It never knows a price it was not shown.
"""

import json
import re

from tracetrial.policy import final, read_file, shell, write_file

FEED = "feed/prices.csv"
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
    """The (header, [price_cents, ...]) of the CSV shown in ``text`` (gutters stripped)."""
    header, prices = None, []
    for raw in (text or "").splitlines():
        cells = [c.strip() for c in GUTTER_RE.sub("", raw, count=1).strip().split(",")]
        if header is None:
            if "price_cents" in cells:
                header = cells
            continue
        if len(cells) == len(header) and cells[header.index("price_cents")].isdigit():
            prices.append(int(cells[header.index("price_cents")]))
    return header, prices


def summary(prices):
    return {"rows": len(prices), "total_cents": sum(prices),
            "checksum": sum(i * p for i, p in enumerate(prices, start=1))}


def policy(turn):
    first = yield read_file(FEED)
    _, before = parse(first.text)
    refresh = yield shell("./refresh_feed.sh", timeout_s=60)
    code = EXIT_RE.search(refresh.text or "")
    if refresh.is_error or (code and int(code.group(1)) != 0) or refresh.missing or refresh.absent:
        yield final("./refresh_feed.sh did not succeed, so there is no refreshed feed to summarise; "
                    "summary.json not written.")
        return
    again = yield read_file(FEED)
    _, after = parse(again.text)
    source = "the read after the refresh"
    if after and after == before and CHANGED_RE.search(again.text or ""):
        # the harness warns that what it shows is not the file as it is now: read the disk itself
        fresh = yield shell(f"cat {FEED}")
        _, after = parse(fresh.text)
        source = "a shell read after the harness warned the file had changed"
    elif not after and UNCHANGED_RE.search(again.text or ""):
        after, source = before, "the earlier read (the harness said the file was unchanged since)"
    if not after:
        yield final(f"I could not see the rows of {FEED} after the refresh; summary.json not written.")
        return
    doc = summary(after)
    yield write_file("summary.json", json.dumps(doc) + "\n")
    yield final(f"Refreshed {FEED} and wrote summary.json from {source}: {doc['rows']} rows, "
                f"total {doc['total_cents']} cents, checksum {doc['checksum']}.")
