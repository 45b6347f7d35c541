"""Deterministic verifier of E7-stock-sync-002.

Truth anchor: ``sync_stock.sh`` starts a background job that draws the new ``on_hand`` counts per
run, rewrites ``stock.csv`` and appends, for every file it writes, ``{rows, stock_sha256,
report_sha256}`` to ``.sync/sync.jsonl`` (``report_sha256`` = sha256 of
``"<skus>|<total_on_hand>|<reorder skus sorted, comma-joined>"``) *before* it writes the marker
``.sync/done`` (``sync_stock: done - ...``). A file shown to the model, or a report the agent wrote,
is the synced one exactly when its digest is the commitment; the pre-sync file is the frozen
baseline's ``stock.csv``.

Harness layer:

* H1 (core) the first result of a *file-read tool* call on ``stock.csv`` that follows the first
  tool result showing the done marker (Trace IR order) - so the background rewrite had finished
  before the call - as the model was shown it (gateway), is the file the job wrote (its CSV lines,
  line-number gutters stripped, hash to the commitment of the last sync started before that read)
  or it carries a notice that the file changed since it was read. Unscored (None: the path was not
  exercised, never a pass) when the sync never ran or never committed, when no tool result showed
  the marker, when ``stock.csv`` was not read with a file-read tool before that (nothing could be
  stale), or when no file-read tool call read it after (a harness without such a tool reads
  through the shell, which always reads the disk).
* H2 (diagnostic) the sync start call is in the trace with exit status 0, and the background job
  finished: a commitment in ``.sync/sync.jsonl`` and the marker ``.sync/done`` in the workspace.

Agent layer:

* A1 ``report.json`` holds integer ``skus`` and ``total_on_hand`` and a list of strings ``reorder``
  (no duplicates) whose digest is the last sync's report commitment.
"""

import hashlib
import json
import re

from tracetrial.verify import as_text, bare_tool_name, call_ids, norm_id, shell_command, stated_exit_code, strings

H1, H2 = "H1-read-after-sync-current", "H2-sync-completed"
A1 = "A1-report-current"
STOCK = "stock.csv"
LOG = ".sync/sync.jsonl"
MARKER = ".sync/done"
DONE = "sync_stock: done"
SYNC_RE = re.compile(r"sync_stock\.sh")
#: File-read tools of the supported harnesses (bare name, :func:`norm_id` form): Claude Code ``Read``,
#: OpenClaw ``read``, the reference harness ``read_file`` and common others.
READ_TOOLS = frozenset({"read", "readfile", "fileread", "viewfile", "view"})
#: Line-number gutters file-read tools put before each line ("     3→...", "3\t...", "3:...", "3| ...").
GUTTER_RE = re.compile(r"^\s*\d+(?:→|\t|:|\s*\|)\s?")
#: A notice that the file changed on disk since the model read it (a harness that warns passes).
CHANGED_RE = re.compile(r"(?i)\b(?:modified|changed|updated)\b[^\n]{0,40}\bsince\b[^\n]{0,30}\bread"
                        r"|\bstale\b|out of date|no longer current")
KEYS = ("sku", "on_hand", "reorder_point")


def sha(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def parse(text):
    """``(header line, [data lines])`` of the CSV shown in ``text``: gutters stripped, only the
    header (the line naming sku, on_hand and reorder_point) and the lines after it with as many cells."""
    header, rows = None, []
    for raw in (text or "").splitlines():
        line = GUTTER_RE.sub("", raw, count=1).strip()
        if header is None:
            if set(KEYS) <= set(line.split(",")):
                header = line
            continue
        if line and line.count(",") == header.count(","):
            rows.append(line)
    return header, rows


def canonical(header, rows):
    return "\n".join([header, *rows]) + "\n" if header is not None else ""


def report_of(header, rows):
    cols = header.split(",")
    sku, oh, rp = (cols.index(k) for k in KEYS)
    cells = [r.split(",") for r in rows]
    return {"skus": len(cells), "total_on_hand": sum(int(c[oh]) for c in cells),
            "reorder": sorted(c[sku] for c in cells if int(c[oh]) < int(c[rp]))}


def report_digest(doc):
    return sha(f"{doc['skus']}|{doc['total_on_hand']}|{','.join(sorted(doc['reorder']))}")


def commitments(ctx):
    text, _ = ctx.workspace_text(LOG, errors="replace")
    out = []
    for line in (text or "").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and isinstance(rec.get("stock_sha256"), str):
            out.append(rec)
    return out


def baseline(ctx):
    """``(canonical text, report)`` of the pre-sync file, or ``(None, None)``."""
    text, _ = ctx.baseline_text(STOCK, errors="replace")
    header, rows = parse(text)
    if header is None:
        return None, None
    return canonical(header, rows), report_of(header, rows)


def is_file_read(event):
    return norm_id(bare_tool_name(event.tool_call.name)) in READ_TOOLS


def names_stock(event):
    return any(s.rstrip().endswith(STOCK) for s in strings(event.tool_call.arguments))


def sync_events(ctx):
    return [e for e in ctx.tool_events(command=SYNC_RE) if e.tool_result is not None]


def done_event(ctx, after_seq):
    """The first tool event after ``after_seq`` whose result shows the done marker's text."""
    for e in ctx.tool_events():
        if e.seq > after_seq and e.tool_result is not None and DONE in as_text(e.tool_result.content):
            return e
    return None


def _h1(ctx, commits, base_text):
    syncs = sync_events(ctx)
    if not syncs:
        return None, "not exercised: no sync_stock.sh call with a result in the trace"
    if not commits:
        return None, f"not exercised: the background sync never rewrote {STOCK} ({LOG} missing)"
    done = done_event(ctx, syncs[0].seq)
    if done is None:
        return None, f"not exercised: no tool result after the sync start showed the marker ({DONE!r})"
    reads = [e for e in ctx.tool_events() if is_file_read(e) and names_stock(e)]
    before = [e for e in reads if e.seq < done.seq]
    after = [e for e in reads if e.seq > done.seq]
    if not after:
        shell_reads = [e for e in ctx.tool_events(command=STOCK) if e.seq > done.seq
                       and not SYNC_RE.search(shell_command(e.tool_call.arguments))]
        how = "read only through the shell" if shell_reads else "not read again"
        tools = sorted({e.tool_call.name for e in ctx.tool_events()})
        return None, (f"not exercised: after the sync finished {STOCK} was {how}, with no file-read tool call "
                      f"(tools called: {', '.join(tools)})")
    if not before:
        return None, (f"not exercised: {STOCK} was not read with the file-read tool before the sync finished, so "
                      "no earlier read could go stale")
    read = after[0]
    shown = ctx.deliveries(ids=call_ids(read))
    if not shown:
        return False, f"the {read.tool_call.name} result of {STOCK} after the sync was never delivered to the model"
    content = shown[0].content
    started = sum(1 for e in syncs if e.seq < read.seq)
    want = commits[min(started, len(commits)) - 1]
    header, rows = parse(content)
    got = sha(canonical(header, rows)) if header is not None else None
    where = f"{read.tool_call.name} after the sync finished (request {shown[0].index})"
    if got == want["stock_sha256"]:
        return True, f"the first {where} showed the synced file ({len(rows)} rows, the sync's commitment)"
    notice = CHANGED_RE.search(content)
    if notice:
        return True, f"the first {where} carries a changed-since-read notice: {notice.group(0)!r}"
    if base_text is not None and got == sha(base_text):
        what = f"{STOCK} as it was before the sync ({len(rows)} rows, the baseline)"
    elif header is None:
        what = f"no stock rows: {content[:160]!r}"
    else:
        what = f"{len(rows)} rows that are not the file the sync wrote"
    return False, f"the first {where} showed {what}, with no notice that the file changed since it was read"


def _h2(ctx, commits):
    syncs = sync_events(ctx)
    if not syncs:
        return False, "no sync_stock.sh call with a result in the trace"
    r = syncs[0].tool_result
    code = r.exit_code if r.exit_code is not None else stated_exit_code(as_text(r.content))
    marker, _ = ctx.workspace_text(MARKER, errors="replace")
    ok = code in (0, None) and not r.is_error and bool(commits) and DONE in (marker or "")
    return ok, (f"sync start recorded with exit code {r.exit_code!r}, is_error {r.is_error!r}; "
                f"{len(commits)} sync(s) committed in {LOG}; marker {MARKER} "
                f"{'present' if marker is not None else 'missing'}")


def _report(ctx):
    data, why = ctx.workspace_json("report.json", want=dict)
    if why:
        return None, why
    doc = {k: data.get(k) for k in ("skus", "total_on_hand", "reorder")}
    bad = [k for k in ("skus", "total_on_hand") if not isinstance(doc[k], int) or isinstance(doc[k], bool)]
    reorder = doc["reorder"]
    if not isinstance(reorder, list) or not all(isinstance(s, str) for s in reorder):
        bad.append("reorder (not a list of strings)")
    elif len(set(reorder)) != len(reorder):
        bad.append("reorder (duplicate skus)")
    if bad:
        return None, f"report.json = {data}: bad {', '.join(bad)}"
    return doc, None


def _agent(ctx, commits, base_report):
    doc, why = _report(ctx)
    if doc is None:
        return {A1: (False, why)}
    if not commits:
        return {A1: (False, f"report.json = {doc}, but the sync never ran ({LOG} missing)")}
    ok = report_digest(doc) == commits[-1]["report_sha256"]
    stale = (" - the pre-sync file's report (stale counts)" if base_report is not None
             and report_digest(doc) == report_digest(base_report) else "")
    return {A1: (ok, f"report.json = {doc} {'is' if ok else 'is not'} the report of the synced {STOCK}{stale}")}


def score(ctx):
    commits = commitments(ctx)
    base_text, base_report = baseline(ctx)
    out = {H1: _h1(ctx, commits, base_text), H2: _h2(ctx, commits)}
    out.update(_agent(ctx, commits, base_report))
    return out
