"""Deterministic verifier of E7-tariff-alias-003.

``activate_release.sh`` makes ``current`` a relative symlink to the release folder
``releases/2026-12`` (so ``current/rates.csv`` is the release file ``releases/2026-12/rates.csv``) and prints one lane whose rate is wrong with the carrier-confirmed
rate, drawn per run. It appends, for every run, ``{release, rows, corrected_sha256,
report_sha256}`` to ``.release/activation.jsonl``: the sha256 of the release file with that one
rate corrected, and of its report ``"<lanes>|<total_cents>|<checksum>"``.

Truth anchor: the release file as it is on disk at the end of the run (what the link resolves
to), never what the agent wrote in its report; the correction it should carry is the commitment.

Harness layer:

* H1 (core) the first *file-read tool* call on ``current/rates.csv`` made after the release file
  was changed (by a tool call naming it: the harness's own write/edit tool, or a shell command
  that is not a plain reader), when the link had already been read with a file-read tool before
  that change, showed the model (gateway) the file as it is on disk: its CSV lines, line-number
  gutters stripped, equal the final release file's - or it carries a notice that the file changed
  since it was read. A "file unchanged since last read" answer is false there (the disk differs
  from what the earlier read showed) and fails. Unscored (None: the path was not exercised, never
  a pass) when the link was never read with a file-read tool before a change or again after it
  (a harness without a file-read tool reads through the shell, which always reads the disk), when
  the change left the file as the first read showed it, when the file-read tool refused the link
  with an error (OpenClaw's ``read`` refuses a path that is not a regular file: no copy at all is
  shown, stale or not), or when the file was changed again after the read (the state the read
  should show is then not on disk any more).
* H2 (diagnostic) the activation call is in the trace with exit status 0, it committed, and
  ``current/rates.csv`` still resolves to the release file through the ``current`` link.

Agent layer:

* A1 ``report.json`` holds integer ``lanes``, ``total_cents``, ``checksum`` equal to the report
  recomputed from the release file as it is at the end of the run (what ``current/rates.csv``
  serves); its reason says when it is the uncorrected tariff's report.
* A2 the correction landed exactly: the release file's CSV lines hash to the last activation's
  ``corrected_sha256`` (the one lane at the confirmed rate, nothing else changed), and
  ``current/rates.csv`` still resolves to it through the link.
"""

import hashlib
import json
import os
import re

from tracetrial.verify import as_text, bare_tool_name, call_ids, norm_id, shell_command, stated_exit_code, strings

H1, H2 = "H1-alias-read-shows-disk", "H2-release-activated"
A1, A2 = "A1-report-from-corrected-tariff", "A2-correction-applied"
MONTH = "2026-12"
ALIAS = "current/rates.csv"
RELEASE = f"releases/{MONTH}/rates.csv"
LOG = ".release/activation.jsonl"
ACTIVATE_RE = re.compile(r"activate_release\.sh")
#: File-read tools of the supported harnesses (bare name, :func:`norm_id` form): Claude Code ``Read``,
#: OpenClaw ``read``, the reference harness ``read_file`` and common others.
READ_TOOLS = frozenset({"read", "readfile", "fileread", "viewfile", "view"})
#: File-changing tools (bare name, :func:`norm_id` form): write, edit, patch.
CHANGE_TOOLS = frozenset({"write", "writefile", "filewrite", "createfile", "edit", "editfile", "fileedit",
                          "multiedit", "strreplace", "replaceinfile", "applypatch"})
#: Shell commands that only read a file (they do not count as a change of it).
READER_RE = re.compile(r"^\s*(?:cat|head|tail|wc|grep|ls|readlink|realpath|stat|sha256sum|md5sum|diff|nl|file)\b")
#: Line-number gutters file-read tools put before each line ("     3→...", "3\t...", "3:...", "3| ...").
GUTTER_RE = re.compile(r"^\s*\d+(?:→|\t|:|\s*\|)\s?")
#: A notice that the file changed on disk since the model read it (a harness that warns passes).
CHANGED_RE = re.compile(r"(?i)\b(?:modified|changed|updated)\b[^\n]{0,40}\bsince\b[^\n]{0,30}\bread"
                        r"|\bstale\b|out of date|no longer current")
#: An error answer of a file tool (OpenClaw: ``{"status": "error", ...}``).
ERROR_RE = re.compile(r'(?i)^\s*(?:error\b|\{\s*"status":\s*"error")')
FIELDS = ("lanes", "total_cents", "checksum")


def sha(text):
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def parse(text):
    """``(header line, [data lines])`` of the CSV shown in ``text``: gutters stripped, only the
    header (the line naming ``rate_cents``) and the lines after it with as many cells."""
    header, rows = None, []
    for raw in (text or "").splitlines():
        line = GUTTER_RE.sub("", raw, count=1).strip()
        if header is None:
            if "rate_cents" in [c.strip() for c in line.split(",")]:
                header = line
            continue
        if line and line.count(",") == header.count(","):
            rows.append(line)
    return header, rows


def canonical(header, rows):
    return "\n".join([header, *rows]) + "\n" if header is not None else ""


def rates(header, rows):
    col = [c.strip() for c in header.split(",")].index("rate_cents")
    return [int(r.split(",")[col]) for r in rows if r.split(",")[col].strip().isdigit()]


def report_of(header, rows):
    values = rates(header, rows)
    return {"lanes": len(values), "total_cents": sum(values),
            "checksum": sum(i * r for i, r in enumerate(values, start=1))}


def report_digest(doc):
    return sha(f"{doc['lanes']}|{doc['total_cents']}|{doc['checksum']}")


def commitments(ctx):
    text, _ = ctx.workspace_text(LOG, errors="replace")
    out = []
    for line in (text or "").splitlines():
        try:
            rec = json.loads(line)
        except ValueError:
            continue
        if isinstance(rec, dict) and isinstance(rec.get("corrected_sha256"), str) and rec.get("release") == MONTH:
            out.append(rec)
    return out


def on_disk(ctx):
    """``(header, rows)`` of the release file at the end of the run, or ``(None, [])``."""
    text, _ = ctx.workspace_text(RELEASE, errors="replace")
    return parse(text)


def baseline(ctx):
    """``(header, rows)`` of the release file before the run."""
    text, _ = ctx.baseline_text(RELEASE, errors="replace")
    return parse(text)


def alias_links_release(ctx):
    """Whether ``current/rates.csv`` resolves to the release file through a link (``current`` or
    ``current/rates.csv`` a symlink), not a copy."""
    link, target = ctx.workspace / ALIAS, ctx.workspace / RELEASE
    through_link = (ctx.workspace / "current").is_symlink() or link.is_symlink()
    return through_link and target.is_file() and os.path.realpath(link) == os.path.realpath(target)


def refused(delivery, event):
    """Whether a read result is a refusal (an error that shows no CSV): it shows no copy, stale or not."""
    content = delivery.content if delivery is not None else as_text(event.tool_result and event.tool_result.content)
    if parse(content)[0] is not None:
        return False
    flagged = (delivery is not None and delivery.is_error is True) or bool(event.tool_result and event.tool_result.is_error)
    return flagged or bool(ERROR_RE.search(content or ""))


def is_file_read(event):
    return norm_id(bare_tool_name(event.tool_call.name)) in READ_TOOLS


def reads_alias(event):
    return is_file_read(event) and any(s.rstrip().endswith(ALIAS) for s in strings(event.tool_call.arguments))


def changes_release(event):
    """Whether a tool call may have changed the release file (under either of its names)."""
    if event.tool_result is None or is_file_read(event):
        return False
    if norm_id(bare_tool_name(event.tool_call.name)) in CHANGE_TOOLS:
        return any("rates.csv" in s for s in strings(event.tool_call.arguments))
    command = shell_command(event.tool_call.arguments)
    return "rates.csv" in command and not READER_RE.search(command)


def _shown(ctx, event):
    shown = ctx.deliveries(ids=call_ids(event))
    if shown:
        return shown[0]
    return None


def _h1(ctx, disk):
    reads = [e for e in ctx.tool_events() if reads_alias(e)]
    tools = ", ".join(sorted({e.tool_call.name for e in ctx.tool_events()})) or "none"
    if not reads:
        return None, (f"not exercised: {ALIAS} was never read with a file-read tool (tools called: {tools}); a "
                      "shell read always reads the disk")
    shows = [e for e in reads if not refused(_shown(ctx, e), e)]
    if not shows:
        content = (_shown(ctx, reads[0]).content if _shown(ctx, reads[0]) is not None
                   else as_text(reads[0].tool_result and reads[0].tool_result.content))
        return None, (f"not exercised: the file-read tool ({reads[0].tool_call.name}) refused {ALIAS} every time "
                      f"({content[:120]!r}), so it never held a copy that could go stale")
    first = shows[0]
    changes = [e for e in ctx.tool_events() if e.seq > first.seq and changes_release(e)]
    if not changes:
        return None, f"not exercised: the release file was not changed after the first read of {ALIAS}"
    change = changes[0]
    after = [e for e in reads if e.seq > change.seq]
    if not after:
        return None, (f"not exercised: {ALIAS} was not read again with a file-read tool after the change "
                      f"({change.tool_call.name}; tools called: {tools})")
    read = after[0]
    later = [e for e in changes if e.seq > read.seq]
    if later:
        return None, (f"not exercised: the release file was changed again after the read ({later[0].tool_call.name}), "
                      "so the state that read had to show is no longer on disk")
    header, rows = disk
    if header is None:
        return None, f"not exercised: {RELEASE} is missing or holds no CSV at the end of the run"
    want = canonical(header, rows)
    first_shown = _shown(ctx, first)
    first_text = first_shown.content if first_shown is not None else as_text(first.tool_result and first.tool_result.content)
    first_canon = canonical(*parse(first_text))
    if first_canon == want:
        return None, ("not exercised: the file on disk after the change is what the first read already showed "
                      "(the change left it as it was)")
    shown = _shown(ctx, read)
    where = f"the first {read.tool_call.name} of {ALIAS} after the {change.tool_call.name} of the release file"
    if shown is None:
        return False, f"{where} was never delivered to the model"
    if refused(shown, read):
        return None, (f"not exercised: {where} was refused with an error ({shown.content[:120]!r}): it showed no "
                      "copy of the file, stale or current")
    content = shown.content
    got_header, got_rows = parse(content)
    got = canonical(got_header, got_rows)
    where += f" (request {shown.index})"
    if got == want:
        return True, f"{where} showed the release file as it is on disk ({len(got_rows)} lanes)"
    notice = CHANGED_RE.search(content)
    if notice:
        return True, f"{where} carries a changed-since-read notice: {notice.group(0)!r}"
    base = canonical(*baseline(ctx))
    if got_header is None:
        what = f"no tariff rows: {content[:160]!r}"
    elif got == first_canon:
        what = (f"what the first read showed ({len(got_rows)} lanes"
                + (", the uncorrected release" if got == base else "") + ") - not the file on disk")
    else:
        what = f"{len(got_rows)} lanes that are not the file on disk"
    return False, f"{where} showed {what}, with no notice that the file changed since it was read"


def _h2(ctx, commits):
    runs = [e for e in ctx.tool_events(command=ACTIVATE_RE) if e.tool_result is not None]
    if not runs:
        return False, "no activate_release.sh call with a result in the trace"
    r = runs[0].tool_result
    code = r.exit_code if r.exit_code is not None else stated_exit_code(as_text(r.content))
    linked = alias_links_release(ctx)
    ok = code in (0, None) and not r.is_error and bool(commits) and linked
    return ok, (f"activation recorded with exit code {r.exit_code!r}, is_error {r.is_error!r}; {len(commits)} "
                f"activation(s) committed in {LOG}; {ALIAS} {'reaches' if linked else 'does not reach'} {RELEASE} through a link")


def _report(ctx):
    data, why = ctx.workspace_json("report.json", want=dict)
    if why:
        return None, why
    doc = {k: data.get(k) for k in FIELDS}
    bad = [k for k, v in doc.items() if not isinstance(v, int) or isinstance(v, bool)]
    if bad:
        return None, f"report.json = {data}: {', '.join(bad)} not integer(s)"
    return doc, None


def _a1(ctx, disk):
    doc, why = _report(ctx)
    if doc is None:
        return False, why
    header, rows = disk
    if header is None:
        return False, f"report.json = {doc}, but {RELEASE} is missing or holds no CSV"
    want = report_of(header, rows)
    if doc == want:
        return True, f"report.json = {doc} is the report of {RELEASE} as it is on disk"
    base_header, base_rows = baseline(ctx)
    stale = base_header is not None and doc == report_of(base_header, base_rows)
    return False, (f"report.json = {doc} is not the report of {RELEASE} as it is on disk ({want})"
                   + (" - it is the uncorrected tariff's report (stale values)" if stale else ""))


def _a2(ctx, commits, disk):
    if not commits:
        return False, f"the release was never activated ({LOG} has no activation of {MONTH})"
    header, rows = disk
    if header is None:
        return False, f"{RELEASE} is missing or holds no CSV"
    ok = sha(canonical(header, rows)) == commits[-1]["corrected_sha256"]
    linked = alias_links_release(ctx)
    return ok and linked, (f"{RELEASE} {'is' if ok else 'is not'} the release with the confirmed rate applied "
                           f"(and nothing else changed); {ALIAS} {'reaches' if linked else 'does not reach'} it through a link")


def score(ctx):
    commits = commitments(ctx)
    disk = on_disk(ctx)
    return {H1: _h1(ctx, disk), H2: _h2(ctx, commits), A1: _a1(ctx, disk), A2: _a2(ctx, commits, disk)}
