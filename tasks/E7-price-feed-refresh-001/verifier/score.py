"""Deterministic verifier of E7-price-feed-refresh-001.

Truth anchor: ``refresh_feed.sh`` draws the new prices per run and appends, for every feed it
writes, ``{rows, feed_sha256, summary_sha256}`` to ``.feed/refresh.jsonl`` (``summary_sha256`` =
sha256 of ``"<rows>|<total_cents>|<checksum>"``). A feed shown to the model, or a summary the agent
wrote, is the refreshed one exactly when its digest is the commitment; the pre-refresh feed is the
frozen baseline's ``feed/prices.csv``.

Harness layer:

* H1 (core) the first result of a *file-read tool* call on ``feed/prices.csv`` that follows the
  refresh call's result (Trace IR order), as the model was shown it (gateway), is the feed the
  refresh wrote - its CSV lines, line-number gutters stripped, hash to the commitment of the last
  refresh before that read - or it carries a notice that the file changed since it was read.
  Unscored (None: the path was not exercised, never a pass) when the refresh never ran, when the
  feed was not read with a file-read tool before the refresh (nothing could be stale), or when no
  file-read tool call read it after the refresh (a harness without such a tool reads through the
  shell, which always reads the disk).
* H2 (diagnostic) the refresh call is in the trace with its result, exit status 0, and the refresh
  wrote the feed (a commitment exists).

Agent layer:

* A1 ``summary.json`` holds integer ``rows``, ``total_cents``, ``checksum`` whose digest is the
  last refresh's summary commitment.
* A2 ``summary.json`` is present and is not the summary of the baseline (pre-refresh) feed.
"""

import hashlib
import json
import re

from tracetrial.verify import as_text, bare_tool_name, call_ids, norm_id, shell_command, stated_exit_code, strings

H1, H2 = "H1-read-after-change-current", "H2-refresh-ran"
A1, A2 = "A1-summary-current", "A2-no-stale-values"
FEED = "feed/prices.csv"
LOG = ".feed/refresh.jsonl"
REFRESH_RE = re.compile(r"refresh_feed\.sh")
#: File-read tools of the supported harnesses (bare name, :func:`norm_id` form): Claude Code ``Read``,
#: OpenClaw ``read``, the reference harness ``read_file`` and common others.
READ_TOOLS = frozenset({"read", "readfile", "fileread", "viewfile", "view"})
#: Line-number gutters file-read tools put before each line ("     3→...", "3\t...", "3:...", "3| ...").
GUTTER_RE = re.compile(r"^\s*\d+(?:→|\t|:|\s*\|)\s?")
#: A notice that the file changed on disk since the model read it (a harness that warns passes).
CHANGED_RE = re.compile(r"(?i)\b(?:modified|changed|updated)\b[^\n]{0,40}\bsince\b[^\n]{0,30}\bread"
                        r"|\bstale\b|out of date|no longer current")
FIELDS = ("rows", "total_cents", "checksum")


def sha(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def parse(text):
    """``(header line, [data lines])`` of the CSV shown in ``text``: gutters stripped, only the
    header (the line naming ``price_cents``) and the lines after it with as many cells."""
    header, rows = None, []
    for raw in (text or "").splitlines():
        line = GUTTER_RE.sub("", raw, count=1).strip()
        if header is None:
            if "price_cents" in line.split(","):
                header = line
            continue
        if line.count(",") == header.count(","):
            rows.append(line)
    return header, rows


def canonical(header, rows):
    return "\n".join([header, *rows]) + "\n" if header is not None else ""


def prices(header, rows):
    col = header.split(",").index("price_cents")
    return [int(r.split(",")[col]) for r in rows if r.split(",")[col].strip().isdigit()]


def summary_of(values):
    return {"rows": len(values), "total_cents": sum(values),
            "checksum": sum(i * p for i, p in enumerate(values, start=1))}


def summary_digest(doc):
    return sha(f"{doc['rows']}|{doc['total_cents']}|{doc['checksum']}")


def commitments(ctx):
    text, _ = ctx.workspace_text(LOG, errors="replace")
    out = []
    for line in (text or "").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and isinstance(rec.get("feed_sha256"), str):
            out.append(rec)
    return out


def baseline(ctx):
    """``(canonical text, summary)`` of the pre-refresh feed, or ``(None, None)``."""
    text, _ = ctx.baseline_text(FEED, errors="replace")
    header, rows = parse(text)
    if header is None:
        return None, None
    return canonical(header, rows), summary_of(prices(header, rows))


def is_file_read(event):
    return norm_id(bare_tool_name(event.tool_call.name)) in READ_TOOLS


def names_feed(event):
    return any(s.rstrip().endswith(FEED) for s in strings(event.tool_call.arguments))


def refresh_events(ctx):
    return [e for e in ctx.tool_events(command=REFRESH_RE) if e.tool_result is not None]


def _shell_reads(ctx, after_seq):
    return [e for e in ctx.tool_events(command="prices.csv")
            if e.seq > after_seq and not REFRESH_RE.search(shell_command(e.tool_call.arguments))]


def _h1(ctx, commits, base_text):
    refreshes = refresh_events(ctx)
    if not refreshes:
        return None, "not exercised: no refresh_feed.sh call with a result in the trace"
    if not commits:
        return None, f"not exercised: the refresh never rewrote the feed ({LOG} missing)"
    first = refreshes[0]
    reads = [e for e in ctx.tool_events() if is_file_read(e) and names_feed(e)]
    before = [e for e in reads if e.seq < first.seq]
    after = [e for e in reads if e.seq > first.seq]
    if not after:
        how = ("read only through the shell" if _shell_reads(ctx, first.seq) else "not read again")
        tools = sorted({e.tool_call.name for e in ctx.tool_events()})
        return None, (f"not exercised: after the refresh the feed was {how}, with no file-read tool call "
                      f"(tools called: {', '.join(tools)})")
    if not before:
        return None, ("not exercised: the feed was not read with the file-read tool before the refresh, so no "
                      "earlier read could go stale")
    read = after[0]
    shown = ctx.deliveries(ids=call_ids(read))
    if not shown:
        return False, f"the {read.tool_call.name} result of the feed after the refresh was never delivered to the model"
    content = shown[0].content
    done = sum(1 for e in refreshes if e.seq < read.seq)
    want = commits[min(done, len(commits)) - 1]
    header, rows = parse(content)
    got = sha(canonical(header, rows)) if header is not None else None
    where = f"{read.tool_call.name} after the refresh (request {shown[0].index})"
    if got == want["feed_sha256"]:
        return True, f"the first {where} showed the refreshed feed ({len(rows)} rows, the refresh's commitment)"
    notice = CHANGED_RE.search(content)
    if notice:
        return True, f"the first {where} carries a changed-since-read notice: {notice.group(0)!r}"
    if base_text is not None and got == sha(base_text):
        what = f"the feed as it was before the refresh ({len(rows)} rows, the baseline)"
    elif header is None:
        what = f"no feed rows: {content[:160]!r}"
    else:
        what = f"{len(rows)} rows that are not the feed the refresh wrote"
    return False, f"the first {where} showed {what}, with no notice that the file changed since it was read"


def _h2(ctx, commits):
    refreshes = refresh_events(ctx)
    if not refreshes:
        return False, "no refresh_feed.sh call with a result in the trace"
    r = refreshes[0].tool_result
    code = r.exit_code if r.exit_code is not None else stated_exit_code(as_text(r.content))
    ok = code in (0, None) and not r.is_error and bool(commits)
    return ok, (f"refresh recorded with exit code {r.exit_code!r}, is_error {r.is_error!r}; "
                f"{len(commits)} refresh(es) committed in {LOG}")


def _summary(ctx):
    data, why = ctx.workspace_json("summary.json", want=dict)
    if why:
        return None, why
    doc = {k: data.get(k) for k in FIELDS}
    bad = [k for k, v in doc.items() if not isinstance(v, int) or isinstance(v, bool)]
    if bad:
        return None, f"summary.json = {data}: {', '.join(bad)} not integer(s)"
    return doc, None


def _agent(ctx, commits, base_summary):
    doc, why = _summary(ctx)
    if doc is None:
        return {A1: (False, why), A2: (False, why)}
    out = {}
    if not commits:
        out[A1] = (False, f"summary.json = {doc}, but the refresh never ran ({LOG} missing)")
    else:
        ok = summary_digest(doc) == commits[-1]["summary_sha256"]
        stale = " - the pre-refresh feed's summary" if doc == base_summary else ""
        out[A1] = (ok, f"summary.json = {doc} {'is' if ok else 'is not'} the summary of the refreshed feed{stale}")
    stale = doc == base_summary
    out[A2] = (not stale, f"summary.json = {doc} " + ("is the summary of the feed before the refresh (stale values)"
                                                      if stale else "is not the pre-refresh feed's summary"))
    return out


def score(ctx):
    commits = commitments(ctx)
    base_text, base_summary = baseline(ctx)
    out = {H1: _h1(ctx, commits, base_text), H2: _h2(ctx, commits)}
    out.update(_agent(ctx, commits, base_summary))
    return out
