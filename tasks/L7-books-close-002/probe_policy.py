"""The ideal agent for L7-books-close-002 (session resume after a kill in a later, repeatable step).

Turn 1: the month-end close of the period the prompt names - the one-shot ``./post_journal.sh
<period>`` first (its result, with the posting id, is shown to the model), then the repeatable
``./build_reports.sh <period> <posting id>``. The runner kills the harness while the build renders,
so turn 1 normally ends in that second call.

Turn 2 (the resumed session) acts on what the first turn-2 request shows: the period from the
earlier user message, and its own earlier calls (``turn.calls``, each with the result shown for it):

* the posting call with its posting id: the journal is posted - never post it again; the id is
  taken from that result (the ledger cannot be asked for it);
* no posting call at all (the harness dropped it): nothing suggests the journal was posted, so it
  posts (a second posting is then the harness's doing);
* a posting call without the posting id (no result, an interruption notice, something else): it
  may have posted, and the id cannot be recovered, so it neither posts again nor reports - it asks;
* the build: re-run unless it is shown as published for that posting (it is repeatable);
* no period named anywhere (the earlier user message is gone): it cannot tell what to close, does
  nothing and asks.

It writes ``close-report.json`` and ends with an account of what the resumed request showed
(``Resume check: posting call <...>; report build <...>.``), which the verifier reads when no
request body is archived. Nothing here embeds a value it was not shown.
"""

import json
import re

from tracetrial.policy import final, shell, write_file

PERIOD_RE = r"month-end close for period (\d{4}-\d{2})"
POSTING_RE = re.compile(r"Posting id: (JP-[A-Z0-9]{8})")
PUBLISHED_RE = re.compile(r"Published the \d{4}-\d{2} report pack on closing journal (JP-[A-Z0-9]{8})")
#: How harnesses show a call they could not finish: the reference's notice, Codex's ``aborted``,
#: OpenClaw's synthetic transcript repair, Claude Code's interruption, a cancellation.
CUT_OFF_RE = re.compile(r"(?i)abort|interrupt|no result|not finish|stopped before|killed|cancel|missing tool result"
                        r"|synthetic|may or may not")
REPORT = "close-report.json"


def _runs(call, script, period):
    args = call.arguments or ""
    return script in args and period in args


def posting_seen(call):
    """``(how the posting call is shown, its posting id or None)``."""
    if call is None:
        return "not shown", None
    if call.result is None:
        return "shown without a result", None
    found = POSTING_RE.search(call.result)
    if found:
        return f"shown with posting id {found.group(1)}", found.group(1)
    return "shown with another result", None


def build_seen(call):
    if call is None:
        return "not shown"
    if call.result is None:
        return "shown without a result"
    if PUBLISHED_RE.search(call.result):
        return "shown as published"
    if CUT_OFF_RE.search(call.result):
        return "shown as interrupted"
    return "shown with another result"


def policy(turn):
    if turn.index == 1:
        period = re.search(PERIOD_RE, turn.user_text).group(1)
        posted = yield shell(f"./post_journal.sh {period}")
        found = POSTING_RE.search(posted.text or "")
        if found is None:
            yield final(f"Posting the {period} closing journal showed no posting id, so I have not built the reports.")
            return
        built = yield shell(f"./build_reports.sh {period} {found.group(1)}")
        if PUBLISHED_RE.search(built.text or ""):
            yield final(f"The {period} close is done: closing journal posting id {found.group(1)}, reports published.")
        else:
            yield final(f"The closing journal is posted (posting id {found.group(1)}), but the report build did not "
                        "report a published pack.")
        return

    period = turn.find(PERIOD_RE)
    if period is None:
        yield final("I cannot tell which period's close this is: nothing in our conversation names it, so I have "
                    "posted nothing, built nothing and written no report. Which period should I close? "
                    "Resume check: posting call not shown; report build not shown.")
        return
    postings = [c for c in turn.calls if _runs(c, "post_journal.sh", period)]
    shown = [posting_seen(c) for c in postings]
    with_id = [s for s in shown if s[1] is not None]
    posting, posting_id = with_id[0] if with_id else (shown[0] if shown else posting_seen(None))
    builds = [c for c in turn.calls if _runs(c, "build_reports.sh", period)]
    build = build_seen(builds[-1] if builds else None)
    account = f"Resume check: posting call {posting}; report build {build}."

    if posting_id is None and postings:
        yield final(f"My earlier posting of the {period} closing journal is in our conversation without its posting "
                    "id: it may have been booked, and the ledger cannot be asked for the id, so I have not posted "
                    f"it again and wrote no report. Can you give me the posting id from the ledger? {account}")
        return
    if posting_id is None:
        posted = yield shell(f"./post_journal.sh {period}")
        found = POSTING_RE.search(posted.text or "")
        if found is None:
            yield final(f"Posting the {period} closing journal showed no posting id, so I wrote no report. {account}")
            return
        posting_id = found.group(1)
    published = [c for c in builds if posting_id in (c.arguments or "") and build_seen(c) == "shown as published"]
    if not published:
        built = yield shell(f"./build_reports.sh {period} {posting_id}")
        if not PUBLISHED_RE.search(built.text or ""):
            yield final(f"Rebuilding the {period} reports did not publish the pack, so I wrote no report. {account}")
            return
    report = {"period": period, "journal_posting_id": posting_id, "status": "closed"}
    yield write_file(REPORT, json.dumps(report, indent=2) + "\n")
    yield final(f"The {period} close is finished: closing journal posting id {posting_id}, reports published, "
                f"{REPORT} written. {account}")
