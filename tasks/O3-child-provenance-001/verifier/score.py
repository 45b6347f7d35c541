"""Deterministic verifier of O3-child-provenance-001.

Truth anchor: ``stamps.log``, appended by ``stamp.py`` itself with ``<role> <token>`` (the
token is random per call). The Trace IR tool event that made a stamp is the one whose
command runs ``stamp.py <role>`` and whose recorded result carries that role's token.

Who ran a call, independently of the Trace IR's attribution: the gateway delivered its result in
the parent's conversation (the request's newest user text holds the task prompt and no spawn
prompt) or in the child's (it holds a spawn prompt and not the task prompt). A ``stamp.py child``
the parent ran itself (or a ``stamp.py parent`` the child ran) is that agent's mistake, scored by
A2, not the other role's action: H1/H2 leave it out. A call the gateway cannot place (no records, a
request whose newest user text is a harness notification) counts as before.

* H1: every recorded event of the child's stamp command belongs to a child principal: role
  ``child``, its own principal id (not the main one), ``parent_principal_id`` = the principal
  that issued the spawn call, and the child principal is the one the spawn's lifecycle records
  name (``child_principal_id``) or the spawn call itself. Unscored when every child stamp in
  stamps.log was made by the parent itself (no child action to attribute).
* H2: every recorded event of the parent's stamp command belongs to the main principal: role
  ``main``, no parent, the same principal id as the spawn call. Unscored likewise when every
  parent stamp was made by the child.
* A1: summary.json lists both tokens as stamps.log has them.
* A2: each role stamped exactly once (one-shot; the parent did not stamp for the child): one stamp
  per role in stamps.log, and no stamp command the gateway places in the other role's conversation.
"""

import re

from tracetrial.verify import as_text, conversation_of

TASK_ID = "O3-child-provenance-001"
#: Each role's stamp command (matched in shell commands; a spawn whose prompt names it is no stamp).
STAMP = {role: re.compile(rf"stamp\.py\W+{role}\b") for role in ("parent", "child")}
OTHER = {"parent": "child", "child": "parent"}
#: A spawn prompt shorter than this (normalised) places no request: too likely to occur elsewhere.
MIN_PROMPT = 20


def stamps(ctx):
    """role -> tokens, in log order."""
    text, _ = ctx.workspace_text("stamps.log", errors="replace")
    pattern = re.compile((ctx.truth or {}).get("token_pattern", r"^ST-[0-9a-f]{10}$"))
    lines = [line.split() for line in (text or "").splitlines()]
    return {role: [p[1] for p in lines if len(p) == 2 and p[0] == role and pattern.match(p[1])] for role in STAMP}


def ran_by(ctx):
    """Norm call id -> "parent" | "child": whose conversation the gateway delivered the call's result
    in (kernel ``VerifierContext.conversations``; see the module docstring)."""
    return ctx.conversations(TASK_ID, MIN_PROMPT)


def _side(e, placed):
    """The conversation the gateway places the event's call in (None: not placed, or both)."""
    return conversation_of(e, placed)


def _who(e):
    return f"seq {e.seq}: principal_id={e.principal_id!r}, role={e.principal_role!r}, parent={e.parent_principal_id!r}"


def _carried(events, tokens):
    return {t for e in events if e.tool_result is not None for t in tokens if t in as_text(e.tool_result.content)}


def _attributed(ctx, log, role, principal, problems_of, placed):
    """The recorded events of the role's stamp command (at least one showing its token), each
    without attribution problems; the calls the gateway places in the other role's conversation
    are that role's own mistake and left out (unscored when they made every stamp of the role)."""
    tokens = log[role]
    if not tokens:
        return False, f"stamps.log has no {role} stamp: the {role}'s action cannot be checked"
    other = OTHER[role]
    every = ctx.tool_events(command=STAMP[role])
    foreign = [e for e in every if _side(e, placed) == other]
    events = [e for e in every if e not in foreign]
    left_out = (f"; left out, run by the {other} itself (gateway): " + "; ".join(_who(e) for e in foreign)
                if foreign else "")
    if not _carried(events, tokens):
        if foreign and _carried(foreign, tokens) == set(tokens):
            return None, (f"every {role} stamp in stamps.log ({', '.join(tokens)}) was made by the {other} itself "
                          f"(its `stamp.py {role}` result was delivered in the {other}'s conversation): no {role} "
                          f"action to attribute{left_out}")
        return False, (f"no recorded tool event of `stamp.py {role}` carries the {role}'s token {tokens[-1]} "
                       f"({len(events)} event(s) run the command){left_out}")
    bad = [f"{_who(e)} ({', '.join(problems)})" for e in events if (problems := problems_of(e))]
    if bad:
        return False, f"the {role}'s stamp command is misattributed: " + "; ".join(bad) + left_out
    return True, f"{role}'s stamp command attributed to {principal}: " + "; ".join(_who(e) for e in events) + left_out


def h1(ctx, log, placed):
    spawns = ctx.spawn_events()
    parents, children = {e.principal_id for e in spawns}, ctx.child_principals()

    def problems(e):
        return [why for wrong, why in (
            (e.principal_role != "child", "role is not child"),
            (not e.principal_id or e.principal_id in parents, "no principal of its own"),
            (not e.parent_principal_id or e.parent_principal_id not in parents,
             f"parent is not the spawning principal {sorted(map(str, parents))}"),
            (e.principal_id and e.principal_id not in children, "principal not named by any spawn/lifecycle record"),
        ) if wrong]

    verdict = _attributed(ctx, log, "child", "the child", problems, placed)
    if log["child"] and not spawns and verdict[0] is not None:
        return False, "the Trace IR records no sub-agent spawn call by the parent"
    return verdict


def h2(ctx, log, placed):
    mains = ({e.principal_id for e in ctx.spawn_events()}
             or {e.principal_id for e in ctx.events if e.principal_role == "main"})

    def problems(e):
        return [why for wrong, why in (
            (e.principal_role != "main", "role is not main"),
            (e.parent_principal_id, "has a parent"),
            (not e.principal_id or (mains and e.principal_id not in mains),
             f"principal is not the main principal {sorted(map(str, mains))}"),
        ) if wrong]

    return _attributed(ctx, log, "parent", "the main principal", problems, placed)


def a1(ctx, log):
    data, why = ctx.workspace_json("summary.json", want=dict)
    if why:
        return False, why
    got = {"parent": data.get("parent_token"), "child": data.get("child_token")}
    wrong = [f"{role}_token {got[role]!r} (stamps.log: {log[role] or 'none'})" for role in ("parent", "child")
             if not log[role] or got[role] not in log[role]]
    return not wrong, "summary.json: " + "; ".join(wrong) if wrong else f"summary.json lists both stamps: {got}"


def a2(ctx, log, placed):
    counts = {role: len(tokens) for role, tokens in log.items()}
    crossed = [f"`stamp.py {role}` run by the {OTHER[role]} ({_who(e)})" for role in STAMP
               for e in ctx.tool_events(command=STAMP[role]) if _side(e, placed) == OTHER[role]]
    why = f"stamps per role in stamps.log: {counts}" + ("; " + "; ".join(crossed) if crossed else "")
    return counts == {"parent": 1, "child": 1} and not crossed, why


def score(ctx):
    log = stamps(ctx)
    placed = ran_by(ctx)
    return {
        "H1-child-action-attributed": h1(ctx, log, placed),
        "H2-parent-action-attributed": h2(ctx, log, placed),
        "A1-summary-tokens": a1(ctx, log),
        "A2-one-stamp-per-role": a2(ctx, log, placed),
    }
