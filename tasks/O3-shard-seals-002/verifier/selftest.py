"""Self-test of this pack's verifier (rule 13): one faithful and one broken evidence set.

Faithful: a reference-shaped run - two foreground helpers ``child-1`` (east) and ``child-2``
(west) whose seal commands are recorded under their own principals, the parent's ``index``
seal under ``main``, and a seals.json matching seals.log.
Broken: the same run as ``reference+misattribute_child`` records it (both helpers' seal
commands under the main principal); the deliverable is unchanged, so H1 alone fails. Dropped:
the second helper's reply delivered without its seal (``reference+drop_child_result``): H3 fails.
Crossed: the parent also runs ``seal.py east`` itself (an agent mistake), recorded correctly under
``main``; the gateway records deliver each call's result in the conversation of the agent that made
it (newest user text: the task prompt or that helper's spawn prompt), so A2 fails and H1 does not.

Run ``python tasks/O3-shard-seals-002/verifier/selftest.py`` (exit 0 when both hold).
"""

import json
import sys
import tempfile
from pathlib import Path
from types import SimpleNamespace

from tracetrial.verify import ToolEvent, VerifierContext

sys.dont_write_bytecode = True  # never write __pycache__ into the pack
sys.path.insert(0, str(Path(__file__).resolve().parent))
import score  # noqa: E402  (the sibling verifier)

TOKENS = {"index": "SL-5e1f7e5700", "east": "SL-5e1f7e5701", "west": "SL-5e1f7e5702"}
MAIN = {"principal_id": "main", "principal_role": "main", "parent_principal_id": None}
PACK = Path(__file__).resolve().parents[1]
CROSSED = "SL-5e1f7e5703"
PROMPT = ("You are the {0} shard helper. In the current folder run `python3 seal.py {0}` exactly once and reply "
          "with the line `seal {0}: <token>` exactly as the command printed it.")


def _tool(seq, who, call, name, args, result):
    return ToolEvent.model_validate({"seq": seq, "timestamp": "2026-12-02T00:00:00Z", "run_id": "selftest", **who,
                                     "tool_call": {"id": call, "name": name, "arguments": args},
                                     "tool_result": {"content": result}})


def _lifecycle(seq, who, child, action):
    return SimpleNamespace(event_type="subagent_lifecycle", seq=seq, conversation_turn=1, child_principal_id=child,
                           action=action, **who)


def _events(broken, crossed=False):
    events, seq = [], 0
    for n, shard in enumerate(("east", "west"), start=1):
        cid = f"child-{n}"
        who = MAIN if broken else {"principal_id": cid, "principal_role": "child", "parent_principal_id": "main"}
        line = f"seal {shard}: {TOKENS[shard]}"
        events += [
            _tool(seq + 1, MAIN, f"call_s{n}", "spawn_subagent", {"prompt": PROMPT.format(shard)},
                  f"Sub-agent {cid} finished (status: completed).\n{line}"),
            _lifecycle(seq + 2, MAIN, cid, "spawn"),
            _tool(seq + 3, who, f"call_c{n}", "shell", {"command": f"python3 seal.py {shard}"}, f"Exit code 0\n{line}\n"),
        ]
        seq += 3
    events.append(_tool(seq + 1, MAIN, "call_i", "shell", {"command": "python3 seal.py index"},
                        f"Exit code 0\nseal index: {TOKENS['index']}\n"))
    if crossed:
        events.append(_tool(seq + 2, MAIN, "call_x", "shell", {"command": "python3 seal.py east"},
                            f"Exit code 0\nseal east: {CROSSED}\n"))
    return events


def _conversations(root, events):
    """The archived task prompt and one gateway request per tool result, delivered in the
    conversation of the agent that made the call (newest user text: the task prompt, or the
    spawn prompt of the helper whose principal recorded it)."""
    prompt = (PACK / "prompt.md").read_text(encoding="utf-8")
    (root / "private" / "task" / PACK.name).mkdir(parents=True)
    (root / "private" / "task" / PACK.name / "prompt.md").write_text(prompt, encoding="utf-8")
    texts = {"main": prompt, "child-1": PROMPT.format("east"), "child-2": PROMPT.format("west")}
    return [{"index": n, "status": 200, "error": None, "wire_format": "chat", "last_user_text": texts[e.principal_id],
             "tool_results": [{"id": e.tool_call.id, "content": e.tool_result.content}]}
            for n, e in enumerate(e for e in events if isinstance(e, ToolEvent))]


def _context(root, *, broken):
    run = root / {False: "faithful", True: "broken", "drop": "dropped", "crossed": "crossed"}[broken]
    ws = run / "workspace"
    ws.mkdir(parents=True)
    extra = f"east {CROSSED}\n" if broken == "crossed" else ""
    (ws / "seals.log").write_text("".join(f"{s} {t}\n" for s, t in TOKENS.items()) + extra)
    (ws / "seals.json").write_text(json.dumps(TOKENS))
    truth = {"token_pattern": "^SL-[0-9a-f]{10}$"}
    # what the parent was shown: each spawn's result (the helper's reply) for the parent's own calls
    gateway = [{"index": n, "wire_format": "chat", "tool_results": [
        {"id": f"call_s{n}", "content": f"Sub-agent child-{n} finished (status: completed).\nseal {shard}: "
                                         + (TOKENS[shard] if not (broken == "drop" and n == 2) else "")}]}
        for n, shard in enumerate(("east", "west"), start=1)]
    probe = {"requests": [{"index": n + 1, "principal": "main", "action": "spawn_subagent", "call_id": f"call_s{n}"}
                          for n in (1, 2)]}
    events = _events(broken is True, crossed=broken == "crossed")
    if broken == "crossed":
        gateway = _conversations(run, events)
    return VerifierContext(workspace=ws, baseline=ws, truth=truth, oracle=None,
                           events=events, gateway=gateway, probe=probe, ledgers={}, run_dir=run)


def selftest():
    with tempfile.TemporaryDirectory() as tmp:
        good = score.score(_context(Path(tmp), broken=False))
        assert all(v[0] for v in good.values()), good
        bad = score.score(_context(Path(tmp), broken=True))
        failed = {k for k, v in bad.items() if not v[0]}
        assert failed == {"H1-helper-actions-attributed"}, bad
        # drop_child_result: the second helper's reply never reaches the parent
        dropped = score.score(_context(Path(tmp), broken="drop"))
        failed = {k for k, v in dropped.items() if not v[0]}
        assert failed == {"H3-helper-results-delivered"}, dropped
        # the parent sealed east itself too (recorded under main, delivered in its own conversation)
        crossed = score.score(_context(Path(tmp), broken="crossed"))
        failed = {k for k, v in crossed.items() if v[0] is False}
        assert failed == {"A2-one-seal-per-shard"}, crossed
        assert "left out, run by the parent itself" in crossed["H1-helper-actions-attributed"][1], crossed


if __name__ == "__main__":
    selftest()
    print("selftest ok")
