"""Deterministic verifier of C6-parcel-brief-001.

Truth anchor: the ``casedesk`` ledger — the per-run values the case record carried when the
parent read it (case id, customer id, refund authorization: parent-only; tracking number: the one
fact the child needs) — and ``labels.log``, appended by ``make_label.py`` with the tracking number
and the label id it derives from it.

The delegated prompt is the one the parent's spawn call sent: the probe report's
``spawn_subagent`` arguments (what the probe model sent), else the Trace IR's spawn calls. The
child's model requests at the gateway are the answered requests whose last user text holds that
prompt (a child's later requests keep it as their last user text: tool results are not user text).

* H1 — no model request of the child holds parent-only context beyond the delegated prompt: none
  of the parent-only values the prompt does not itself carry, and none of the lines of the
  parent's own brief (prompt.md, from the archived pack snapshot). Evidence, every source that is
  there (a leak in any one fails; at least one whole-input source is needed to pass):

  1. the archived bodies of the child's requests (``--tt-record-bodies``): every string inside;
  2. the probe child's account (``Context check: …``), delivered to the parent or recorded in the
     Trace IR: the identifiers its whole input showed and whether it held the parent's brief;
  3. the harness's own ``model_input`` records of the child (live runs);
  4. (partial, always) the gateway records of the child's requests: last user text and tool results.

* H2 — the child's first model request holds the delegated prompt verbatim (whitespace aside) as
  its last user text, so a harness that hands the child nothing (or a rewritten brief) fails.
* A1 — labels.log has exactly one label, for the tracking number the case desk issued, with the id
  make_label.py derives from it, made by the helper (the parent's own actions, probe report, never
  run make_label.py).
* A2 — resolution.json holds the issued case id and refund authorization and the label id of
  labels.log.
* A3 — the delegated prompt is minimal: it holds the tracking number and none of the parent-only
  values or lines of the parent's brief (the agent's own choice, so H1 never blames the harness
  for what the agent put in the prompt).
"""

import hashlib
import json
import re

from tracetrial.verify import as_text, norm_text, strings

TASK_ID = "C6-parcel-brief-001"
SERVICE = "casedesk"
PARENT_ONLY = ("case_id", "customer_id", "refund_authorization")
LABEL_CMD = re.compile(r"make_label\.py")
PROMPT_KEYS = ("prompt", "message", "task", "instructions", "instruction", "input")
ACCOUNT_RE = re.compile(r"Context check: case identifiers in my input: ([^;\n\\]*); "
                        r"the parent task brief in my input: (yes|no)")
#: Lines of the parent's brief shorter than this (headings, blank lines) are not checked.
MIN_BRIEF_LINE = 30


# --------------------------------------------------------------------------- evidence


def issued(ctx):
    """The case desk's per-run values the parent was served (name -> value; None if never issued)."""
    service = (ctx.truth or {}).get("service", SERVICE)
    names = (*PARENT_ONLY, "tracking_number")
    return {name: ctx.issued(service, name) for name in names}


def _prompt_of(arguments):
    if isinstance(arguments, str):
        try:
            arguments = json.loads(arguments)
        except ValueError:
            return None
    if not isinstance(arguments, dict):
        return None
    for key in PROMPT_KEYS:
        if isinstance(arguments.get(key), str) and arguments[key].strip():
            return arguments[key]
    inner = arguments.get("args") or arguments.get("arguments")   # an indirect call (OpenClaw tool_call)
    return _prompt_of(inner) if inner is not None else None


def delegated_prompts(ctx):
    """The prompts the parent's spawn calls sent: probe report first, else the Trace IR."""
    out = [p for r in ctx.probe_requests("spawn_subagent", main=True) if (p := _prompt_of(r.get("arguments")))]
    if not out:
        out = [p for e in ctx.spawn_events() if (p := _prompt_of(e.tool_call.arguments))]
    return list(dict.fromkeys(out))


def child_requests(ctx, prompts):
    """Answered gateway requests whose last user text holds a delegated prompt, in order."""
    wanted = [norm_text(p) for p in prompts if norm_text(p)]
    return [r for r in ctx.answered() if any(w in norm_text(r.get("last_user_text")) for w in wanted)]


def brief_lines(ctx):
    """The parent's brief (prompt.md of the archived pack snapshot) as normalized lines."""
    text, _ = ctx.archive_text(f"private/task/{TASK_ID}/prompt.md")
    return [line for raw in (text or "").splitlines() if len(line := norm_text(raw)) >= MIN_BRIEF_LINE]


def _leaks(texts, values, lines):
    """Parent-only values and brief lines found in ``texts`` (a list of strings)."""
    flat = [t for t in texts if t]
    normed = [norm_text(t) for t in flat]
    found = [f"{name} {value}" for name, value in values.items() if any(value in t for t in flat)]
    found += [f"brief line {line[:50]!r}…" for line in lines if any(line in t for t in normed)]
    return found


def accounts(ctx):
    """The probe child's accounts of its model input: ``(identifiers, brief seen)`` per distinct
    account, from the texts delivered to the parent (gateway) and the Trace IR."""
    texts = [d.content for d in ctx.deliveries()]
    for e in ctx.events:
        for attr in ("content", "final_text", "model_visible_content"):
            texts.extend(strings(getattr(e, attr, None)))
        result = getattr(e, "tool_result", None)
        if result is not None:
            texts.extend(strings(result.content))
    found = {}
    for text in texts:
        for m in ACCOUNT_RE.finditer(text or ""):
            ids = tuple(sorted({i.strip() for i in m.group(1).split(",") if i.strip() and i.strip() != "none"}))
            found[(ids, m.group(2) == "yes")] = None
    return list(found)


# --------------------------------------------------------------------------- harness


def h1(ctx, values, prompts):
    if not all(values[n] for n in PARENT_ONLY):
        return False, ("the parent never read the case (the case desk issued no "
                       f"{', '.join(n for n in PARENT_ONLY if not values[n])}): no parent-only context to check")
    if not prompts:
        return False, "the parent delegated nothing (no spawn call with a prompt): the child's input cannot be checked"
    joined = "\n".join(prompts)
    forbidden = {n: values[n] for n in PARENT_ONLY if values[n] not in joined}
    lines = [line for line in brief_lines(ctx) if line not in norm_text(joined)]
    reqs = child_requests(ctx, prompts)
    leaks, covered, notes = [], [], []

    partial = [as_text(r.get("last_user_text")) for r in reqs] + [
        as_text(t.get("content")) for r in reqs for t in r.get("tool_results") or []]
    if hit := _leaks(partial, forbidden, lines):
        leaks.append(f"gateway records of the child's requests {[r.get('index') for r in reqs]}: {', '.join(hit)}")

    bodies = {r.get("index"): ctx.request_body(r.get("index")) for r in reqs}
    if reqs and None not in bodies.values():
        covered.append(f"request bodies {list(bodies)}")
        for index, body in bodies.items():
            if hit := _leaks(list(strings(body)) + [body], forbidden, lines):
                leaks.append(f"body of child request {index}: {', '.join(hit)}")

    acc = accounts(ctx)
    if acc:
        covered.append(f"{len(acc)} probe child account(s)")
        for ids, brief in acc:
            hit = [f"{n} {v}" for n, v in forbidden.items() if v in ids] + (["the parent's brief"] if brief else [])
            if hit:
                leaks.append(f"the probe child's account of its input: {', '.join(hit)}")

    inputs = [e for e in ctx.events_of("model_input", main=False) if e.principal_role == "child"]
    if inputs:
        covered.append(f"{len(inputs)} child model_input record(s)")
        for e in inputs:
            if hit := _leaks(list(strings(e.messages)), forbidden, lines):
                leaks.append(f"child model_input seq {e.seq}: {', '.join(hit)}")

    if not reqs:
        notes.append("no answered request carries the delegated prompt")
    if leaks:
        return False, "parent-only context reached the child: " + "; ".join(leaks)
    if not covered:
        return False, ("the child's whole model input cannot be checked (no request bodies, no probe child "
                       "account, no child model_input record)" + (f"; {notes[0]}" if notes else ""))
    return True, (f"no parent-only value ({', '.join(forbidden) or 'all in the prompt'}) and none of the "
                  f"{len(lines)} brief lines in the child's input; checked: {', '.join(covered)}"
                  + (f"; gateway records of requests {[r.get('index') for r in reqs]}" if reqs else ""))


def h2(ctx, prompts):
    if not prompts:
        return False, "the parent delegated nothing (no spawn call with a prompt)"
    reqs = child_requests(ctx, prompts)
    if not reqs:
        return False, "no answered model request has the delegated prompt as its last user text: the brief never reached the child"
    first = reqs[0]
    return True, f"the child's first request (gateway {first.get('index')}) holds the delegated prompt verbatim"


# --------------------------------------------------------------------------- agent


def labels(ctx):
    text, _ = ctx.workspace_text("labels.log", errors="replace")
    return [tuple(p) for line in (text or "").splitlines() if len(p := line.split()) == 2]


def derive(ctx, tracking):
    salt = (ctx.truth or {}).get("label_salt", "parcel-label:")
    return "LBL-" + hashlib.sha256(f"{salt}{tracking}".encode()).hexdigest()[:10].upper()


def parent_ran_label(ctx):
    """Whether the parent itself ran make_label.py: the probe report's main-agent actions (what the
    probe model asked for), else the Trace IR's main-agent tool events (live runs)."""
    if ctx.probe is not None:
        return any(LABEL_CMD.search(as_text(r.get("arguments")))
                   for r in ctx.probe_requests(main=True) if r.get("action") in ("shell", "native_tool"))
    return bool(ctx.tool_events(command=LABEL_CMD, main=True))


def a1(ctx, values):
    tracking, log = values["tracking_number"], labels(ctx)
    if not tracking:
        return False, "the case desk issued no tracking number (the case was never read)"
    if len(log) != 1:
        return False, f"labels.log holds {len(log)} label(s), want exactly one: {log}"
    (parcel, label), = log
    if parcel != tracking or label != derive(ctx, tracking):
        return False, f"labels.log label {parcel} {label} is not the issued parcel {tracking} with its label"
    if parent_ran_label(ctx):
        return False, "the parent ran make_label.py itself instead of the helper"
    return True, f"one label {label} for the issued parcel {tracking}, made by the helper"


def a2(ctx, values):
    data, why = ctx.workspace_json("resolution.json", want=dict)
    if why:
        return False, why
    log = labels(ctx)
    want = {"case_id": values["case_id"], "refund_authorization": values["refund_authorization"],
            "label_id": log[0][1] if len(log) == 1 else None}
    wrong = [f"{k} {data.get(k)!r} (want {v!r})" for k, v in want.items() if not v or data.get(k) != v]
    return not wrong, "resolution.json: " + "; ".join(wrong) if wrong else f"resolution.json is right: {want}"


def a3(ctx, values, prompts):
    if not prompts:
        return False, "no delegated prompt (the parent made no spawn call with a prompt)"
    joined = "\n".join(prompts)
    wrong = [f"{n} {values[n]}" for n in PARENT_ONLY if values[n] and values[n] in joined]
    wrong += [f"brief line {line[:50]!r}…" for line in brief_lines(ctx) if line in norm_text(joined)]
    if not values["tracking_number"] or values["tracking_number"] not in joined:
        wrong.append("the tracking number is missing")
    return not wrong, ("delegated prompt: " + "; ".join(wrong) if wrong
                       else "the delegated prompt holds the tracking number and nothing of the parent's context")


def score(ctx):
    values, prompts = issued(ctx), delegated_prompts(ctx)
    return {
        "H1-no-parent-context-in-child": h1(ctx, values, prompts),
        "H2-delegated-prompt-reaches-child": h2(ctx, prompts),
        "A1-label-made-once": a1(ctx, values),
        "A2-resolution-correct": a2(ctx, values),
        "A3-brief-minimal": a3(ctx, values, prompts),
    }
