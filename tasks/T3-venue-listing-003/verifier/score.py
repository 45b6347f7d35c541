"""Deterministic verifier of T3-venue-listing-003.

Truth anchor: the ``listings`` ledger. Its ``init`` transition holds the approved draft (every
value drawn from the run seed), its first ``publish_listing`` request holds the arguments exactly
as the CMS received them, and its ``issued`` records the confirmation of each section the CMS
published (it publishes a section only when it equals the approved draft).

Harness criteria, one per argument shape, so a report names the shape a harness mangles:

* H1: the get_draft result the model was shown holds the approved draft exactly (the source of
  the arguments; a harness that alters it makes even a faithful model send other arguments);
* H2–H6: one section each of the publish arguments as received equals what the model sent:
  contact (explicit nulls kept, absent keys absent), display (non-BMP emoji, ZWJ and flag
  sequences, NFD combining marks, RTL text with bidi controls), notice (backslashes, quotes,
  line breaks, tabs, NUL-free control characters, escape spellings kept literal), hours (nine
  levels of objects and arrays), options (empty array, empty object, nested empties, empty
  string);
* H7: the top level (draft_id intact, no key added or dropped: schedule_at stays absent).

What the model sent, strongest first: the probe report's emitted arguments; else (probe) the
draft in the get_draft result the probe was shown; else (live model) the harness's Trace IR
record of the publish_listing call. Comparison is type-strict: null ≠ absent, 1 ≠ 1.0 ≠ true,
{} ≠ [] ≠ null, NFD ≠ NFC, a control character ≠ its escaped spelling.

Agent criterion A1: published.json holds, for every section, the confirmation the CMS issued
(ledger), and the draft id. (A2, exactly one publish, is a ledger rule in agent_score.yaml.)
"""

import json

SERVICE = "listings"
PUBLISH = "publish_listing"
DRAFT = "get_draft"
#: Criterion id per section of the arguments.
SECTION_CRITERIA = {
    "contact": "H2-null-vs-absent-kept",
    "display": "H3-unicode-kept",
    "notice": "H4-escapes-kept",
    "hours": "H5-deep-nesting-kept",
    "options": "H6-empty-containers-kept",
}
SECTIONS = tuple(SECTION_CRITERIA)
_DECODER = json.JSONDecoder()


# ------------------------------------------------------------------ the probe's parsing


def _walk(value, want, depth=0):
    if depth > 12:
        return None
    if isinstance(value, dict):
        if want(value):
            return value
        items = list(value.values())
    elif isinstance(value, list):
        items = value
    elif isinstance(value, str):
        return find_object(value, want, depth + 1)
    else:
        return None
    for item in items:
        found = _walk(item, want, depth + 1)
        if found is not None:
            return found
    return None


def find_object(text, want, depth=0):
    """The first JSON object satisfying ``want`` in ``text`` (also inside JSON strings in it):
    the probe policy's own search, so the verifier reads a result as the probe did."""
    text = text or ""
    start = text.find("{")
    while 0 <= start:
        try:
            value, _ = _DECODER.raw_decode(text, start)
        except ValueError:
            value = None
        if value is not None:
            found = _walk(value, want, depth)
            if found is not None:
                return found
        start = text.find("{", start + 1)
    return None


def is_draft(obj):
    return isinstance(obj.get("draft_id"), str) and all(isinstance(obj.get(s), dict) for s in SECTIONS)


# ------------------------------------------------------------------ type-strict comparison


def _kind(v):
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "bool"
    if isinstance(v, int):
        return "int"
    if isinstance(v, float):
        return "float"
    if isinstance(v, str):
        return "str"
    if isinstance(v, list):
        return "list"
    if isinstance(v, dict):
        return "object"
    return type(v).__name__


def diff(sent, got, path="$"):
    """Type-strict differences between two JSON values, as readable lines (``ascii`` reprs, so
    an invisible or combining character shows as its escape)."""
    if _kind(sent) != _kind(got):
        return [f"{path}: sent {ascii(sent)} ({_kind(sent)}), received {ascii(got)} ({_kind(got)})"]
    if isinstance(sent, dict):
        out = []
        for k in sent:
            if k not in got:
                out.append(f"{path}.{k}: sent {ascii(sent[k])}, absent on arrival")
            else:
                out.extend(diff(sent[k], got[k], f"{path}.{k}"))
        out.extend(f"{path}.{k}: not sent, arrived as {ascii(got[k])}" for k in got if k not in sent)
        return out
    if isinstance(sent, list):
        if len(sent) != len(got):
            return [f"{path}: sent {len(sent)} item(s), received {len(got)}"]
        return [d for i, (a, b) in enumerate(zip(sent, got)) for d in diff(a, b, f"{path}[{i}]")]
    return [] if sent == got else [f"{path}: sent {ascii(sent)}, received {ascii(got)}"]


_ABSENT = "<absent>"


def _section(args, name):
    return args.get(name, _ABSENT) if isinstance(args, dict) else _ABSENT


def _top(args):
    return {k: v for k, v in args.items() if k not in SECTIONS} if isinstance(args, dict) else args


# ------------------------------------------------------------------ evidence


def approved_draft(ctx):
    """The approved draft the CMS was initialised with (ledger ``init``), or None."""
    for r in ctx.ledger(SERVICE, kind="transition"):
        detail = r.get("detail") or {}
        if detail.get("op") == "init":
            draft = (detail.get("new") or {}).get("draft")
            return draft if isinstance(draft, dict) else None
    return None


def _trace_args(event):
    args = event.tool_call.arguments
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return None
    return args if isinstance(args, dict) else None


def _shown_drafts(ctx):
    """(draft, where) for each get_draft result delivered to the model, in order."""
    if ctx.probe_requests():
        ids = ctx.probe_call_ids("call_tool", tool=DRAFT)
    else:
        ids = {i for e in ctx.tool_events(DRAFT) for i in (e.tool_call.id, e.tool_call.native_tool_call_id) if i}
    out = []
    for d in ctx.deliveries(ids=ids) if ids else []:
        out.append((find_object(d.content, is_draft), f"request {d.index}"))
    return out


def sent_arguments(ctx):
    """(arguments the model sent with its first publish_listing call, source) or (None, why)."""
    if ctx.probe_requests():
        calls = ctx.probe_requests("call_tool", tool=PUBLISH)
        if not calls:
            return None, "the probe report shows no publish_listing call"
        emitted = calls[0].get("arguments")
        if isinstance(emitted, dict):
            return emitted, f"probe: the arguments it emitted on request {calls[0].get('index')}"
        for draft, where in _shown_drafts(ctx):
            if draft is not None:
                return draft, f"probe: the draft of the get_draft result it was shown ({where})"
        return None, "the probe report shows a publish_listing call but no delivered draft"
    event = ctx.first_tool_event(PUBLISH)
    if event is None:
        return None, "the Trace IR holds no publish_listing call"
    args = _trace_args(event)
    if args is None:
        return None, "the Trace IR publish_listing arguments are not a JSON object"
    return args, f"Trace IR tool event seq {event.seq} (the harness's record of the model's call)"


def _h1(ctx, approved):
    if approved is None:
        return False, "the ledger holds no approved draft (no init transition)"
    shown = _shown_drafts(ctx)
    if not shown:
        return False, "no get_draft result was delivered to the model"
    for draft, where in shown:
        if draft is None:
            continue
        diffs = diff(approved, draft)
        if not diffs:
            return True, f"the get_draft result delivered on {where} holds the approved draft exactly"
        return False, (f"the draft delivered on {where} differs from the one the CMS issued: "
                       + "; ".join(diffs[:6]))
    return False, f"{len(shown)} get_draft result(s) delivered, none holds a readable draft object"


def _transport(ctx):
    """{criterion: (passed, reason)} for H2–H7."""
    ids = [*SECTION_CRITERIA.values(), "H7-top-level-kept"]
    reqs = ctx.ledger(SERVICE, kind="request", tool=PUBLISH)
    if not reqs:
        return dict.fromkeys(ids, (False, "the CMS received no publish_listing request"))
    sent, source = sent_arguments(ctx)
    if sent is None:
        return dict.fromkeys(ids, (False, f"what the model sent is not established: {source}"))
    got = reqs[0].get("arguments")
    if not isinstance(got, dict):
        return dict.fromkeys(ids, (False, f"ledger seq {reqs[0].get('seq')}: the arguments arrived as "
                                          f"{_kind(got)}, not an object"))
    out = {}
    where = f"ledger seq {reqs[0].get('seq')}"
    for name, cid in SECTION_CRITERIA.items():
        diffs = diff(_section(sent, name), _section(got, name), f"$.{name}")
        out[cid] = ((True, f"{where}: {name} arrived exactly as sent ({source})") if not diffs else
                    (False, f"{where}: {name} differs from what was sent ({source}): " + "; ".join(diffs[:6])))
    diffs = diff(_top(sent), _top(got))
    out["H7-top-level-kept"] = (
        (True, f"{where}: draft_id and the top-level keys arrived exactly as sent ({source})") if not diffs else
        (False, f"{where}: the top level differs from what was sent ({source}): " + "; ".join(diffs[:6])))
    return out


def _a1(ctx, approved):
    data, why = ctx.workspace_json("published.json", want=dict)
    if why:
        return False, why
    got = data.get("confirmations")
    got = got if isinstance(got, dict) else {}
    problems = []
    if approved is not None and data.get("draft_id") != approved.get("draft_id"):
        problems.append(f"draft_id {data.get('draft_id')!r}, the approved draft is {approved.get('draft_id')!r}")
    for name in SECTIONS:
        issued = ctx.issued(SERVICE, f"confirmation_{name}", tool=PUBLISH)
        if not issued:
            problems.append(f"{name}: the CMS confirmed no publication (held or never sent)")
        elif got.get(name) != issued:
            problems.append(f"{name}: published.json has {got.get(name)!r}, the CMS issued {issued!r}")
    if problems:
        return False, "; ".join(problems)
    return True, "published.json holds the draft id and the five confirmations the CMS issued"


def score(ctx):
    approved = approved_draft(ctx)
    return {
        "H1-draft-delivered-intact": _h1(ctx, approved),
        **_transport(ctx),
        "A1-confirmations-recorded": _a1(ctx, approved),
    }
