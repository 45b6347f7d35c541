"""Deterministic verifier of O3-child-provenance-001.

Truth anchor: ``stamps.log``, appended by ``stamp.py`` itself with ``<role> <token>`` (the
token is random per call). The Trace IR tool event that made a stamp is the one whose
command runs ``stamp.py <role>`` and whose recorded result carries that role's token.

* H1: every recorded event of the child's stamp command belongs to a child principal: role
  ``child``, its own principal id (not the main one), ``parent_principal_id`` = the principal
  that issued the spawn call, and the child principal is the one the spawn's lifecycle records
  name (``child_principal_id``) or the spawn call itself.
* H2: every recorded event of the parent's stamp command belongs to the main principal: role
  ``main``, no parent, the same principal id as the spawn call.
* A1: summary.json lists both tokens as stamps.log has them.
* A2: each role stamped exactly once (one-shot; the parent did not stamp for the child).
"""

import re

from tracetrial.verify import as_text

#: Each role's stamp command (matched in shell commands; a spawn whose prompt names it is no stamp).
STAMP = {role: re.compile(rf"stamp\.py\W+{role}\b") for role in ("parent", "child")}


def stamps(ctx):
    """role -> tokens, in log order."""
    text, _ = ctx.workspace_text("stamps.log", errors="replace")
    pattern = re.compile((ctx.truth or {}).get("token_pattern", r"^ST-[0-9a-f]{10}$"))
    lines = [line.split() for line in (text or "").splitlines()]
    return {role: [p[1] for p in lines if len(p) == 2 and p[0] == role and pattern.match(p[1])] for role in STAMP}


def _who(e):
    return f"seq {e.seq}: principal_id={e.principal_id!r}, role={e.principal_role!r}, parent={e.parent_principal_id!r}"


def _attributed(ctx, log, role, principal, problems_of):
    """The recorded events of the role's stamp command (at least one showing its token), each
    without attribution problems."""
    tokens = log[role]
    if not tokens:
        return False, f"stamps.log has no {role} stamp: the {role}'s action cannot be checked"
    events = ctx.tool_events(command=STAMP[role])
    if not any(e.tool_result is not None and any(t in as_text(e.tool_result.content) for t in tokens) for e in events):
        return False, (f"no recorded tool event of `stamp.py {role}` carries the {role}'s token {tokens[-1]} "
                       f"({len(events)} event(s) run the command)")
    bad = [f"{_who(e)} ({', '.join(problems)})" for e in events if (problems := problems_of(e))]
    if bad:
        return False, f"the {role}'s stamp command is misattributed: " + "; ".join(bad)
    return True, f"{role}'s stamp command attributed to {principal}: " + "; ".join(_who(e) for e in events)


def h1(ctx, log):
    spawns = ctx.spawn_events()
    if log["child"] and not spawns:
        return False, "the Trace IR records no sub-agent spawn call by the parent"
    parents, children = {e.principal_id for e in spawns}, ctx.child_principals()

    def problems(e):
        return [why for wrong, why in (
            (e.principal_role != "child", "role is not child"),
            (not e.principal_id or e.principal_id in parents, "no principal of its own"),
            (not e.parent_principal_id or e.parent_principal_id not in parents,
             f"parent is not the spawning principal {sorted(map(str, parents))}"),
            (e.principal_id and e.principal_id not in children, "principal not named by any spawn/lifecycle record"),
        ) if wrong]

    return _attributed(ctx, log, "child", "the child", problems)


def h2(ctx, log):
    mains = ({e.principal_id for e in ctx.spawn_events()}
             or {e.principal_id for e in ctx.events if e.principal_role == "main"})

    def problems(e):
        return [why for wrong, why in (
            (e.principal_role != "main", "role is not main"),
            (e.parent_principal_id, "has a parent"),
            (not e.principal_id or (mains and e.principal_id not in mains),
             f"principal is not the main principal {sorted(map(str, mains))}"),
        ) if wrong]

    return _attributed(ctx, log, "parent", "the main principal", problems)


def a1(ctx, log):
    data, why = ctx.workspace_json("summary.json", want=dict)
    if why:
        return False, why
    got = {"parent": data.get("parent_token"), "child": data.get("child_token")}
    wrong = [f"{role}_token {got[role]!r} (stamps.log: {log[role] or 'none'})" for role in ("parent", "child")
             if not log[role] or got[role] not in log[role]]
    return not wrong, "summary.json: " + "; ".join(wrong) if wrong else f"summary.json lists both stamps: {got}"


def score(ctx):
    log = stamps(ctx)
    counts = {role: len(tokens) for role, tokens in log.items()}
    return {
        "H1-child-action-attributed": h1(ctx, log),
        "H2-parent-action-attributed": h2(ctx, log),
        "A1-summary-tokens": a1(ctx, log),
        "A2-one-stamp-per-role": (counts == {"parent": 1, "child": 1}, f"stamps per role in stamps.log: {counts}"),
    }
