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

import json
import re

SPAWN_TOOLS = {"agent", "task", "spawnagent", "spawnsubagent", "sessionsspawn", "subagent", "delegate"}


def _norm(text):
    return re.sub(r"[^A-Za-z0-9]", "", str(text or "")).lower()


def stamps(ctx):
    """role -> tokens, in log order."""
    out = {"parent": [], "child": []}
    path = ctx.workspace / "stamps.log"
    if not path.is_file():
        return out
    pattern = re.compile((ctx.truth or {}).get("token_pattern", r"^ST-[0-9a-f]{10}$"))
    for line in path.read_text(encoding="utf-8", errors="replace").splitlines():
        parts = line.split()
        if len(parts) == 2 and parts[0] in out and pattern.match(parts[1]):
            out[parts[0]].append(parts[1])
    return out


def _text(value):
    return value if isinstance(value, str) else json.dumps(value, default=str)


COMMAND_KEYS = ("command", "cmd", "script", "commandLine", "command_line", "input")


def _command(args):
    """The command a shell-like tool call runs ('' for other tools, e.g. a spawn whose prompt names it)."""
    if isinstance(args, str):
        try:
            args = json.loads(args)
        except ValueError:
            return ""
    if not isinstance(args, dict):
        return ""
    for key in COMMAND_KEYS:
        value = args.get(key)
        if isinstance(value, list):
            return " ".join(map(str, value))
        if isinstance(value, str):
            return value
    return ""


def stamp_events(ctx, role):
    """Shell tool events whose command runs ``stamp.py <role>``."""
    needle = re.compile(rf"stamp\.py\W+{role}\b")
    return [e for e in ctx.events or [] if e.event_type == "tool" and not _is_spawn(e)
            and needle.search(_command(e.tool_call.arguments))]


def _is_spawn(e):
    """A sub-agent spawn call, namespaced or not ("Agent", "multi_agent_v1__spawn_agent")."""
    return _norm(re.split(r"/|__|\.", str(e.tool_call.name))[-1]) in SPAWN_TOOLS


def spawn_events(ctx):
    return [e for e in ctx.events or [] if e.event_type == "tool" and _is_spawn(e) and e.principal_role != "child"]


def _who(e):
    return (f"seq {e.seq}: principal_id={e.principal_id!r}, role={e.principal_role!r}, "
            f"parent={e.parent_principal_id!r}")


def _acting(ctx, role, tokens):
    """The recorded events of the role's stamp command, and those whose result shows its token."""
    events = stamp_events(ctx, role)
    proven = [e for e in events if e.tool_result is not None
              and any(t in _text(e.tool_result.content) for t in tokens)]
    return events, proven


def h1(ctx, log):
    tokens = log["child"]
    if not tokens:
        return False, "stamps.log has no child stamp: the child's action cannot be checked"
    spawns = spawn_events(ctx)
    if not spawns:
        return False, "the Trace IR records no sub-agent spawn call by the parent"
    parents = {e.principal_id for e in spawns}
    children = {e.child_principal_id for e in ctx.events or []
                if e.event_type in ("subagent_lifecycle", "task_completion") and e.child_principal_id}
    children |= {x for e in spawns for x in (e.tool_call.id, e.tool_call.native_tool_call_id) if x}
    events, proven = _acting(ctx, "child", tokens)
    if not proven:
        return False, (f"no recorded tool event of `stamp.py child` carries the child's token {tokens[-1]} "
                       f"({len(events)} event(s) run the command)")
    bad = []
    for e in events:
        problems = []
        if e.principal_role != "child":
            problems.append("role is not child")
        if not e.principal_id or e.principal_id in parents:
            problems.append("no principal of its own")
        if not e.parent_principal_id or e.parent_principal_id not in parents:
            problems.append(f"parent is not the spawning principal {sorted(map(str, parents))}")
        if e.principal_id and e.principal_id not in children:
            problems.append("principal not named by any spawn/lifecycle record")
        if problems:
            bad.append(f"{_who(e)} ({', '.join(problems)})")
    if bad:
        return False, "the child's stamp command is misattributed: " + "; ".join(bad)
    return True, "child's stamp command attributed to the child: " + "; ".join(_who(e) for e in events)


def h2(ctx, log):
    tokens = log["parent"]
    if not tokens:
        return False, "stamps.log has no parent stamp: the parent's action cannot be checked"
    spawns = spawn_events(ctx)
    mains = {e.principal_id for e in spawns} or {e.principal_id for e in ctx.events or []
                                                   if e.principal_role == "main"}
    events, proven = _acting(ctx, "parent", tokens)
    if not proven:
        return False, (f"no recorded tool event of `stamp.py parent` carries the parent's token {tokens[-1]} "
                       f"({len(events)} event(s) run the command)")
    bad = []
    for e in events:
        problems = []
        if e.principal_role != "main":
            problems.append("role is not main")
        if e.parent_principal_id:
            problems.append("has a parent")
        if not e.principal_id or (mains and e.principal_id not in mains):
            problems.append(f"principal is not the main principal {sorted(map(str, mains))}")
        if problems:
            bad.append(f"{_who(e)} ({', '.join(problems)})")
    if bad:
        return False, "the parent's stamp command is misattributed: " + "; ".join(bad)
    return True, "parent's stamp command attributed to the main principal: " + "; ".join(_who(e) for e in events)


def a1(ctx, log):
    try:
        data = json.loads((ctx.workspace / "summary.json").read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return False, f"summary.json missing or invalid: {exc}"
    if not isinstance(data, dict):
        return False, f"summary.json is not an object: {data!r}"
    got = {"parent": data.get("parent_token"), "child": data.get("child_token")}
    wrong = [f"{role}_token {got[role]!r} (stamps.log: {log[role] or 'none'})" for role in ("parent", "child")
             if not log[role] or got[role] not in log[role]]
    if wrong:
        return False, "summary.json: " + "; ".join(wrong)
    return True, f"summary.json lists both stamps: {got}"


def a2(ctx, log):
    counts = {role: len(tokens) for role, tokens in log.items()}
    return counts == {"parent": 1, "child": 1}, f"stamps per role in stamps.log: {counts}"


def score(ctx):
    log = stamps(ctx)
    return {
        "H1-child-action-attributed": h1(ctx, log),
        "H2-parent-action-attributed": h2(ctx, log),
        "A1-summary-tokens": a1(ctx, log),
        "A2-one-stamp-per-role": a2(ctx, log),
    }
