"""Deterministic verifier of O3-shard-seals-002.

Truth anchor: ``seals.log``, appended by ``seal.py`` itself with ``<shard> <token>`` (the token
is random per call). The Trace IR tool event that sealed a shard is the one whose shell command
runs ``seal.py <shard>`` and whose recorded result carries that shard's token from the log.

Who ran a call, independently of the Trace IR's attribution: the gateway delivered its result in
the parent's conversation (the request's newest user text holds the task prompt and no spawn
prompt) or in a helper's (it holds a spawn prompt and not the task prompt). A ``seal.py east|west``
the parent ran itself (or a ``seal.py index`` a helper ran) is that agent's mistake, scored by A2,
not the other role's action: H1/H2 leave it out. A call the gateway cannot place (no records, a
request whose newest user text is a harness notification) counts as before.

* H1: every recorded event of each helper's seal command (``east``, ``west``) belongs to a child
  principal of its own: role ``child``, a principal id that is not the main one, named by the
  spawn/lifecycle records, ``parent_principal_id`` = the principal that issued the spawn calls;
  the east and west commands are under two different principals; and where the trace links a
  child principal to one spawn call (the call id names the child, or the spawn's result names
  it), that spawn's prompt delegated this shard and not the other one. A shard every seal of which
  (in seals.log) the parent made itself is left out (no helper action to attribute); unscored when
  that holds for both.
* H2: every recorded event of the parent's ``seal.py index`` belongs to the main principal:
  role ``main``, no parent, the same principal id as the spawn calls. Unscored when every index
  seal was made by a helper.
* H3: each helper's reported seal line reached the parent: a result the gateway delivered for one
  of the main agent's own calls (the spawn, a wait or a status call; ids from the probe report),
  or a user-role notification (the request's newest user text), carries the token seals.log
  records for that helper's shard. Not applicable when no helper
  sealed (nothing to deliver) or the probe report names no call of the main agent.
* A1: seals.json holds each shard's token as seals.log records it (the helpers' tokens reach
  the parent only through what each helper reported).
* A2: each shard sealed exactly once (one-shot; the parent did not seal for a helper): one seal per
  shard in seals.log, and no seal command the gateway places in the other role's conversation.
"""

import re

from tracetrial.verify import as_text, conversation_of

TASK_ID = "O3-shard-seals-002"

PARENT = "index"
CHILDREN = ("east", "west")
SHARDS = (PARENT, *CHILDREN)
#: Each shard's seal command (matched in shell commands; a spawn whose prompt names it is no seal).
SEAL = {shard: re.compile(rf"seal\.py\W+{shard}\b") for shard in SHARDS}
#: The role that should run each shard's seal ("parent" | "child"), and who is the other one.
ROLE = {shard: "parent" if shard == PARENT else "child" for shard in SHARDS}
OTHER = {"parent": "child", "child": "parent"}
NAMED = {"parent": "the parent", "child": "a helper"}
#: A spawn prompt shorter than this (normalised) places no request: too likely to occur elsewhere.
MIN_PROMPT = 20


def seals(ctx):
    """shard -> tokens, in log order."""
    text, _ = ctx.workspace_text("seals.log", errors="replace")
    pattern = re.compile((ctx.truth or {}).get("token_pattern", r"^SL-[0-9a-f]{10}$"))
    lines = [line.split() for line in (text or "").splitlines()]
    return {s: [p[1] for p in lines if len(p) == 2 and p[0] == s and pattern.match(p[1])] for s in SHARDS}


def ran_by(ctx):
    """Norm call id -> "parent" | "child": whose conversation the gateway delivered the call's result
    in (kernel ``VerifierContext.conversations``; see the module docstring)."""
    return ctx.conversations(TASK_ID, MIN_PROMPT)


def _side(e, placed):
    """The conversation the gateway places the event's call in (None: not placed, or both)."""
    return conversation_of(e, placed)


def _carried(events, tokens):
    return {t for e in events if e.tool_result is not None for t in tokens if t in as_text(e.tool_result.content)}


def _who(e):
    return f"seq {e.seq}: principal_id={e.principal_id!r}, role={e.principal_role!r}, parent={e.parent_principal_id!r}"


def _events(ctx, log, shard, placed):
    """(the recorded events of the shard's seal command, the events left out, None) or (None, the
    events left out, (verdict, why) they cannot be checked: False, or None when the other role made
    every seal of the shard). Left out: the calls the gateway places in the other role's
    conversation (that role's own mistake, scored by A2)."""
    tokens, other = log[shard], OTHER[ROLE[shard]]
    every = ctx.tool_events(command=SEAL[shard])
    foreign = [e for e in every if _side(e, placed) == other]
    events = [e for e in every if e not in foreign]
    if not tokens:
        return None, foreign, (False, f"seals.log has no {shard} seal: its action cannot be checked")
    if not _carried(events, tokens):
        if foreign and _carried(foreign, tokens) == set(tokens):
            return None, foreign, (None, (
                f"every {shard} seal in seals.log ({', '.join(tokens)}) was made by {NAMED[other]} itself (its "
                f"`seal.py {shard}` result was delivered in that agent's conversation): no {ROLE[shard]} action "
                f"to attribute"))
        return None, foreign, (False, (f"no recorded tool event of `seal.py {shard}` carries the {shard} token "
                                       f"{tokens[-1]} ({len(events)} event(s) run the command)"))
    return events, foreign, None


def _left_out(role, foreign):
    """The note on the events left out as run by the other role (``foreign``: (shard, event))."""
    return (f"; left out, run by {NAMED[OTHER[role]]} itself (gateway): "
            + "; ".join(f"{shard} {_who(e)}" for shard, e in foreign)) if foreign else ""


def spawn_links(ctx, children):
    """child principal id -> the shards delegated by the spawn call(s) the trace links it to
    (the spawn call's id is the child's id, or the spawn's result names the child)."""
    links = {}
    for s in ctx.spawn_events():
        delegated = {c for c in CHILDREN if SEAL[c].search(as_text(s.tool_call.arguments))}
        result = as_text(s.tool_result.content) if s.tool_result is not None else ""
        for child in children:
            named = child in (s.tool_call.id, s.tool_call.native_tool_call_id) or re.search(
                rf"(?<![\w-]){re.escape(child)}(?![\w-])", result)
            if named:
                links.setdefault(child, set()).update(delegated)
    return links


def h1(ctx, log, placed):
    spawns = ctx.spawn_events()
    found = {shard: _events(ctx, log, shard, placed) for shard in CHILDREN}
    foreign = [(shard, e) for shard in CHILDREN for e in found[shard][1]]
    note = _left_out("child", foreign)
    skipped = [found[s][2][1] for s in CHILDREN if found[s][2] and found[s][2][0] is None]
    if len(skipped) == len(CHILDREN):
        return None, "; ".join(skipped) + note
    if any(log[c] for c in CHILDREN) and not spawns:
        return False, "the Trace IR records no sub-agent spawn call by the parent" + note
    parents, children = {e.principal_id for e in spawns}, ctx.child_principals()
    links = spawn_links(ctx, children)
    principals, bad, good = {}, [], []
    for shard in CHILDREN:
        events, _, verdict = found[shard]
        if verdict and verdict[0] is None:
            continue
        if verdict:
            return False, verdict[1] + note
        other = next(c for c in CHILDREN if c != shard)
        for e in events:
            delegated = links.get(e.principal_id, set())
            problems = [why for wrong, why in (
                (e.principal_role != "child", "role is not child"),
                (not e.principal_id or e.principal_id in parents, "no principal of its own"),
                (not e.parent_principal_id or e.parent_principal_id not in parents,
                 f"parent is not the spawning principal {sorted(map(str, parents))}"),
                (e.principal_id and e.principal_id not in children, "principal not named by any spawn/lifecycle record"),
                (other in delegated and shard not in delegated, f"principal is the one spawned for {other}"),
            ) if wrong]
            (bad if problems else good).append(f"{shard} {_who(e)}" + (f" ({', '.join(problems)})" if problems else ""))
            principals.setdefault(shard, set()).add(e.principal_id)
    shared = principals.get("east", set()) & principals.get("west", set())
    if shared:
        bad.append(f"east and west seals are recorded under the same principal {sorted(map(str, shared))}")
    note = "".join(f"; {why}" for why in skipped) + note
    if bad:
        return False, "a helper's seal command is misattributed: " + "; ".join(bad) + note
    return True, "each helper's seal command attributed to its own child principal: " + "; ".join(good) + note


def h2(ctx, log, placed):
    mains = ({e.principal_id for e in ctx.spawn_events()}
             or {e.principal_id for e in ctx.events if e.principal_role == "main"})
    events, foreign, verdict = _events(ctx, log, PARENT, placed)
    note = _left_out("parent", [(PARENT, e) for e in foreign])
    if verdict:
        return verdict[0], verdict[1] + note
    bad = []
    for e in events:
        problems = [why for wrong, why in (
            (e.principal_role != "main", "role is not main"),
            (e.parent_principal_id, "has a parent"),
            (not e.principal_id or (mains and e.principal_id not in mains),
             f"principal is not the main principal {sorted(map(str, mains))}"),
        ) if wrong]
        if problems:
            bad.append(f"{_who(e)} ({', '.join(problems)})")
    if bad:
        return False, "the parent's seal command is misattributed: " + "; ".join(bad) + note
    return True, ("the parent's seal command attributed to the main principal: " + "; ".join(_who(e) for e in events)
                  + note)


def h3(ctx, log):
    sealed = [s for s in CHILDREN if log[s]]
    if not sealed:
        return None, "no helper sealed its shard (seals.log): no result to deliver"
    ids = ctx.probe_call_ids(main=True)
    if not ids:
        return None, "the probe report names no call of the main agent: no delivered result to pair"
    delivered = [d.content for d in ctx.deliveries(ids=ids)]
    # a harness may also hand a finished child's reply to the parent as a user-role notification
    # (Codex: <subagent_notification>); a child's own user text never carries a sibling's seal
    notices = [as_text(r.get("last_user_text")) for r in ctx.gateway]
    missing = [s for s in sealed if not any(t in text for t in log[s] for text in delivered + notices)]
    if missing:
        return False, ("no result or notification delivered to the parent carries the seal of "
                       + ", ".join(f"{s} ({'/'.join(log[s])})" for s in missing)
                       + f"; {len(delivered)} result(s) of the parent's calls and {len(notices)} user text(s) checked")
    return True, f"the parent was shown each helper's seal ({', '.join(sealed)})"


def a1(ctx, log):
    data, why = ctx.workspace_json("seals.json", want=dict)
    if why:
        return False, why
    wrong = [f"{s} {data.get(s)!r} (seals.log: {log[s] or 'none'})" for s in SHARDS
             if not log[s] or data.get(s) not in log[s]]
    if wrong:
        return False, "seals.json: " + "; ".join(wrong)
    return True, f"seals.json lists every shard's seal: { {s: data.get(s) for s in SHARDS} }"


def a2(ctx, log, placed):
    counts = {s: len(tokens) for s, tokens in log.items()}
    crossed = [f"`seal.py {s}` run by {NAMED[OTHER[ROLE[s]]]} ({_who(e)})" for s in SHARDS
               for e in ctx.tool_events(command=SEAL[s]) if _side(e, placed) == OTHER[ROLE[s]]]
    why = f"seals per shard in seals.log: {counts}" + ("; " + "; ".join(crossed) if crossed else "")
    return counts == {s: 1 for s in SHARDS} and not crossed, why


def score(ctx):
    log = seals(ctx)
    placed = ran_by(ctx)
    return {
        "H1-helper-actions-attributed": h1(ctx, log, placed),
        "H2-parent-action-attributed": h2(ctx, log, placed),
        "H3-helper-results-delivered": h3(ctx, log),
        "A1-seals-json-tokens": a1(ctx, log),
        "A2-one-seal-per-shard": a2(ctx, log, placed),
    }
