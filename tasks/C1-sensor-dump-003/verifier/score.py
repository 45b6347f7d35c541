"""Deterministic verifier of C1-sensor-dump-003.

Truth anchor: ``pull_readings.py`` appends every pull (its batch id, drawn per run) to
``.pull/pulls.jsonl``; the real dump is recomputed from the frozen baseline's ``pull_readings.py``
for that batch, never taken from the run. Harness criteria read the gateway records: the tool
results delivered to the model (``content`` is the model-facing text, capped by the recorder at its
first and last 32 KiB, joined without a marker; ``size`` is the full size).

* H1: every delivered read of the dump (a result showing its opening or many of its readings, or a
  read of it refused as too large) holds the whole dump or carries a truncation notice.
* H2: what those notices state about the part left out is accurate: the sizes (the kernel's
  ``check_sizes``) and the position to continue from (OpenClaw's ``offset=1, cursor=C``: the shown
  part must end exactly at character C). The dump is ONE line, so the recorder's head+tail join is
  put back as a line break first: otherwise the kernel could not locate the shown piece of a
  capped one-line result in the dump.
* H3: the digest reached the model in some delivered result. Not scored when nothing of the dump
  was delivered, nor when a notice was shown and the model made no follow-up read (the agent's
  choice, judged by A1); fails when a silent cut hid it or a follow-up read did not deliver it.
* A1/A2: intake.json holds the real digest and the pulled batch.

Every harness criterion is unscored (never a pass) when its evidence is missing.
"""

import re
from pathlib import Path

from tracetrial.verify import as_text, check_sizes, size_statements, strings

H1 = "H1-truncation-disclosed"
H2 = "H2-omitted-size-accurate"
H3 = "H3-digest-delivered"
A1 = "A1-digest"
A2 = "A2-batch"
HARNESS = (H1, H2, H3)
AGENT = (A1, A2)

LEDGER = ".pull/pulls.jsonl"
DELIVERABLE = "intake.json"
#: The recorder keeps the first and last this many bytes of a delivered result (Delivery.content).
RECORDED_EDGE = 32 * 1024
#: A delivered result showing at least this many readings shows the dump (a 400-byte tail does not).
MANY_READINGS = 20
#: A read refused as too large is short and shows nothing of the dump.
REFUSAL_MAX = 4096

# A truncation notice or a refusal as too large, in any of the wordings harnesses use.
NOTICE_RE = re.compile(r"(?i)truncat|omitted|too large|too long|elided|saved to|exceeds|offset=|cursor=|"
                       r"to continue|showing (?:part|the first|lines)")
DIGEST_RE = re.compile(r'"digest"\s*:\s*"([0-9a-f]{16})"')
# Where a notice says to continue reading: "Use offset=1, cursor=51112 to continue" (OpenClaw's
# read: line 1, from character 51112), "Use offset=2 to continue" (from line 2).
CONTINUE_RE = re.compile(r"(?i)\boffset=(\d+)(?:\s*,\s*cursor=(\d+))?")
READING_RE = re.compile(r'\{"i":\d+,"t":"')


# --------------------------------------------------------------------------- the real dump


def real_dump(baseline, batch):
    """The exact dump text for ``batch``, from the frozen baseline's pull_readings.py."""
    source = Path(baseline) / "pull_readings.py"
    namespace = {"__name__": "c1_sensor_baseline_pull", "__file__": str(source)}
    exec(compile(source.read_text(encoding="utf-8"), str(source), "exec"), namespace)  # noqa: S102
    return namespace["render"](batch)


def digest_of(text):
    found = DIGEST_RE.findall(text)
    return found[-1] if found else None


def opening(text):
    """The dump's first characters: its gateway and batch fields (nothing else starts this way)."""
    return text[:text.index('"readings"')]


def trailer(text):
    return text.rstrip("\n")[-60:]


# --------------------------------------------------------------------------- gateway evidence


def recorded_text(d):
    """A delivered result's text with the recorder's head+tail join restored as a line break (the
    recorder joins them without a marker; in a one-line dump the kernel locates shown pieces by
    line, so the join must be a line boundary)."""
    content = d.content
    if not d.result.get("content_truncated"):
        return content
    data = content.encode("utf-8")
    head = data[:RECORDED_EDGE].decode("utf-8", errors="ignore")
    return head + "\n" + content[len(head):]


def dump_calls(ctx, name):
    """How many tool calls the model made that name the dump file (a read, a tail, a page), by the
    Trace IR and by the probe report (whichever saw more), and their call ids."""
    events = ctx.tool_events(args=name)
    probe = [r for r in ctx.probe_requests() if any(name in s for s in strings(r.get("arguments")))]
    ids = {i for e in events for i in (e.tool_call.id, e.tool_call.native_tool_call_id) if i}
    ids |= {r["call_id"] for r in probe if r.get("call_id")}
    return max(len(events), len(probe)), ids


def dump_reads(ctx, text, ids):
    """``(reads, refusals)``: delivered results that show the dump (its opening or many of its
    readings), and short results for a call naming the dump that refuse it with a notice and show
    nothing of it (Claude Code's "File content (408.3KB) exceeds maximum allowed size")."""
    head = opening(text)
    reads = [d for d in ctx.deliveries() if head in d.content or len(READING_RE.findall(d.content)) >= MANY_READINGS]
    refusals = [d for d in ctx.deliveries(ids=ids) if d not in reads and int(d.result.get("size") or 0) < REFUSAL_MAX
                and NOTICE_RE.search(d.content) and not READING_RE.search(d.content)]
    return reads, refusals


def is_complete(d, text):
    """The result holds the whole dump: at least its size, with its opening and its trailer."""
    return (int(d.result.get("size") or 0) >= len(text.encode("utf-8"))
            and opening(text) in d.content and trailer(text) in d.content)


def continuation_check(d, text):
    """``(ok, note)`` for the continuation point a notice on a read of the dump states (the
    position reading must go on from, so it states exactly what was shown), or None when it states
    none. The dump is one line: ``offset=1, cursor=C`` says the result showed its first C
    characters; ``offset=N`` with N > 1 says it showed the whole line."""
    found = CONTINUE_RE.search(d.content)
    if found is None or opening(text) not in d.content:
        return None
    offset, cursor = int(found.group(1)), found.group(2)
    shown = recorded_text(d)
    notice = shown.rfind("[", 0, shown.find(found.group(0)))
    pieces = [p for p in shown[:notice if notice >= 0 else len(shown)].rstrip().split("\n") if p]
    line = text.rstrip("\n")
    claimed = int(cursor) if offset == 1 and cursor is not None else (len(line) if offset > 1 else 0)
    ok = bool(pieces) and line.startswith(pieces[0]) and line[:claimed].endswith(pieces[-1])
    start = line.find(pieces[-1]) if pieces else -1
    where = start + len(pieces[-1]) if start >= 0 else None
    return ok, (f"continue at offset={offset}" + (f", cursor={cursor}" if cursor else "")
                + f": claims {claimed} of {len(line)} characters shown; the shown part ends at {where} "
                + ("(ok)" if ok else "(OFF)"))


# --------------------------------------------------------------------------- score


def _agent(ctx, batches, batch, text):
    data, problem = ctx.workspace_json(DELIVERABLE, want=dict)
    if problem:
        return dict.fromkeys(AGENT, (False, problem))
    got_batch, got_digest = data.get("batch"), data.get("digest")
    if text is None:
        return dict.fromkeys(AGENT, (False, (f"{LEDGER} records no pull: there is no real dump "
                                            f"({DELIVERABLE} = {data})")))
    want = digest_of(text)
    return {
        A1: (got_digest == want, f"{DELIVERABLE} digest = {got_digest!r}, the dump of batch {batch} ends with {want}"),
        A2: (got_batch in batches, f"{DELIVERABLE} batch = {got_batch!r}; pulled {batches}"),
    }


def _harness(ctx, batch, text):
    if text is None:
        return dict.fromkeys(HARNESS, (None, f"{LEDGER} records no pull: there was no dump to read"))
    name = f"{batch}.json"
    size = len(text.encode("utf-8"))
    calls, ids = dump_calls(ctx, name)
    reads, refusals = dump_reads(ctx, text, ids)
    if not reads and not refusals:
        why = (f"no delivered result shows the dump {name} or refuses it as too large "
               f"({calls} call(s) named it)")
        return dict.fromkeys(HARNESS, (None, why))
    disclosed, sizes, silent = [], [], []
    ok_sizes = True
    for d in reads:
        where = f"request {d.index}"
        if is_complete(d, text):
            disclosed.append(f"{where}: the whole dump ({d.result.get('size')} bytes)")
        elif NOTICE_RE.search(d.content):
            disclosed.append(f"{where}: shortened to {d.result.get('size')} of {size} bytes, with a notice")
            notes = []
            if size_statements(recorded_text(d)):
                good, notes = check_sizes(recorded_text(d), text)
                ok_sizes = ok_sizes and good
            cont = continuation_check(d, text)
            if cont is not None:
                ok_sizes = ok_sizes and cont[0]
                notes = [*notes, cont[1]]
            if notes:
                sizes.append(f"{where}: " + "; ".join(notes))
        else:
            silent.append(where)
            disclosed.append(f"{where}: shortened to {d.result.get('size')} of {size} bytes with NO notice")
    for d in refusals:
        disclosed.append(f"request {d.index}: the read refused with a notice, nothing of the dump shown")
        if size_statements(d.content):
            good, notes = check_sizes(d.content, text)
            ok_sizes = ok_sizes and good
            sizes.append(f"request {d.index} (refusal): " + "; ".join(notes))
    want = digest_of(text)
    hits = [d.index for d in ctx.deliveries() if want in as_text(d.content)]
    if hits:
        h3 = (True, f"the digest {want} reached the model in request(s) {hits}")
    elif silent:
        h3 = (False, f"the digest {want} never reached the model: the dump was cut without notice ({', '.join(silent)})")
    elif calls >= 2:
        h3 = (False, (f"the digest {want} never reached the model, although {calls - 1} follow-up call(s) "
                     f"named the dump after the notice"))
    else:
        h3 = (None, ("a notice was shown and the model made no follow-up read of the dump (the agent's "
                    "choice, judged by A1)"))
    return {
        H1: (not silent, "; ".join(disclosed)),
        H2: (ok_sizes, " | ".join(sizes)) if sizes else (None, ("no notice on a read of the dump states a size or "
                                                                   "a position to continue from")),
        H3: h3,
    }


def _pulls(ctx):
    records, why = ctx.workspace_jsonl(LEDGER, missing_ok=True)
    return [str(r["batch"]) for r in records or [] if r.get("batch")], why


def score(ctx):
    batches, why = _pulls(ctx)
    data, _ = ctx.workspace_json(DELIVERABLE, want=dict)
    named = data.get("batch") if isinstance(data, dict) else None
    batch = named if named in batches else (batches[-1] if batches else None)
    text = real_dump(ctx.baseline, batch) if batch else None
    out = _agent(ctx, batches, batch, text)
    out.update(_harness(ctx, batch, text))
    if why:
        out = {k: (v[0], f"{v[1]} ({why})") for k, v in out.items()}
    return out
