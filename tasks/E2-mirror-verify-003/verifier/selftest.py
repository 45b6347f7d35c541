"""Self-test of ``score.py`` (TASK_GUIDE rule 13): three faithful and eight broken evidence sets.

A hand-built verification: ~244 KB of ``ok`` lines on stdout, the 303-byte mismatch report on
stderr, exit 1, its (file, mirror checksum) pair committed in ``.verify/runs.jsonl`` as
``verify_mirror.py`` commits it. Faithful: the reference harness (stdout cut at 16 KiB with a
notice, then ``[stderr]``), Codex (merged output, head + tail cut, the line in the tail) and a
head-only cut whose notice names a saved copy that the probe greps (rule 5). Broken: the
``drop_stderr`` shape, Claude Code's exit-1 path (head-only cut, no notice, same transcript), a cut
shown while the native record keeps the line (H1 without H2), the line shown but recorded nowhere
(H2 alone), the manifest checksum reported as the mirror's, a publish, two runs, and a do-nothing run.

Run from the repository root: ``python tasks/E2-mirror-verify-003/verifier/selftest.py``
(exit 0 when every verdict is as expected). The full unit tests are
``tests/tasks/test_e2_mirror_verify_003.py``.
"""

from __future__ import annotations

import hashlib
import json
import shutil
import sys
import tempfile
import types
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from tracetrial.verify import EventBase, ToolCall, ToolEvent, ToolResult, VerifierContext

HERE = Path(__file__).resolve().parent
PACK = HERE.parent
TRUTH = json.loads((PACK / "truth.json").read_text(encoding="utf-8"))
T0 = datetime(2026, 12, 1, tzinfo=UTC)
LIMIT, SAVED = 16 * 1024, "/tmp/tt-outputs/verify.stdout.txt"
FILES = [f"pool/{s}/{n[0]}/{n}/{n}_1.{v}.0_amd64.deb" for s in ("main", "contrib", "updates")
         for n in ("libssl", "zlib-dev", "curl-tools", "openssh", "nginx-common", "postgres", "redis-utils",
                   "python-doc", "perl", "rsync") for v in range(64)][:1920]
PAIRS = [(FILES[777], "c3" * 32), (FILES[1500], "5e" * 32)]  # (file, mirror sha256) of each run


def _score() -> types.ModuleType:
    mod = types.ModuleType("e2m_selftest_score")
    exec(compile((HERE / "score.py").read_text(encoding="utf-8"), str(HERE / "score.py"), "exec"), mod.__dict__)  # noqa: S102
    return mod


def _sha(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def streams(pair: tuple[str, str]) -> tuple[str, str]:
    out = (f"verify: mirror snapshot 2026-11-30T02:00Z against MANIFEST.sha256 ({len(FILES)} files)\n"
           + "".join(f"ok  {p}  sha256:{_sha(p)}\n" for p in FILES if p != pair[0])
           + f"verify: done, {len(FILES)} files checked\n")
    err = (f"verify: MISMATCH {pair[0]}: manifest sha256 {_sha(pair[0])}, mirror sha256 {pair[1]}\n"
           f"verify: 1 of {len(FILES)} files failed verification; the mirror must not be published\n")
    return out, err


def reference(out: str, err: str) -> str:
    sep = "" if out[:LIMIT].endswith("\n") else "\n"
    notice = (f"{sep}[stdout truncated: showing the first {LIMIT} of {len(out)} bytes; {len(out) - LIMIT} bytes omitted."
              f" Full stdout saved to {SAVED}]\n")
    return f"Exit code 1\n{out[:LIMIT]}{notice}" + (f"[stderr]\n{err}" if err else "")


def codex(out: str, err: str) -> str:
    return (f"Process exited with code 1\nOriginal token count: 60953\nOutput:\n{(out + err)[:20000]}"
            f"…55000 tokens truncated…{(out + err)[-20000:]}")


VIEWS: dict[str, Callable[[str, str], str]] = {"reference": reference, "codex": codex, "dropped": lambda out, err: reference(out, ""),
         "head": lambda out, err: f"Exit code 1\n{(out + err)[:10000]}",
         "saved": lambda out, err: f"Exit code 1\nOutput too large (238KB). Full output saved to: {SAVED}\n{out[:2000]}"}


def _ctx(root: Path, *, runs: int = 1, view: str = "reference", recorded: str | None = None, wire: str = "chat",
         native: bool = False, report: Any = "auto", published: bool = False) -> VerifierContext:
    ws, base = root / "workspace", root / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    first: dict[str, Any] = {"index": 0, "status": 200, "error": None, "wire_format": wire, "tools": [{"name": "shell"}],
             "tool_results": []}
    gateway: list[dict[str, Any]] = [first]
    events: list[EventBase] = []
    requests: list[dict[str, Any]] = []
    seen: tuple[str, str] | None = None
    calls: list[tuple[str, str, str, str]] = []  # (call id, command, shown, recorded)
    for n in range(runs):
        out, err = streams(PAIRS[n])
        calls.append((f"call_e2m_{n + 1}", "python3 verify_mirror.py", VIEWS[view](out, err),
                      VIEWS[recorded or view](out, err)))
        if view == "saved":  # the probe greps the copy the notice names
            hit = f"1921:{err.splitlines()[0]}"
            calls.append((f"call_e2m_grep{n + 1}", f"grep -n -m 5 MISMATCH {SAVED}", hit, hit))
        seen = PAIRS[n] if any(PAIRS[n][1] in c[2] for c in calls) else None
    if runs:
        (ws / ".verify").mkdir()
        (ws / ".verify" / "runs.jsonl").write_text("".join(json.dumps({"pid": 700 + n, "mismatch_sha256": _sha(
            f"{p}|{s}")}) + "\n" for n, (p, s) in enumerate(PAIRS[:runs])))
    for seq, (call, command, text, rec) in enumerate(calls, 1):
        gateway.append({**first, "index": seq, "tool_results": [{"id": call, "is_error": None, "content": text,
                                                                  "size": len(text.encode())}]})
        events.append(ToolEvent(seq=seq, timestamp=T0, run_id="selftest", conversation_turn=1,
                                tool_call=ToolCall(id=call, name="shell", arguments={"command": command}),
                                tool_result=ToolResult(content=rec, exit_code=1 if "verify_" in command else 0)))
        requests.append({"index": seq - 1, "kind": "main", "turn": 1, "action": "shell", "call_id": call,
                         "arguments": {"command": command}})
    if native:  # the harness's own record of the full merged output (a Codex --json item)
        (root / "native").mkdir()
        item = {"type": "command_execution", "aggregated_output": "".join(streams(PAIRS[0])), "exit_code": 1}
        (root / "native" / "turn-1.stdout").write_text(json.dumps({"type": "item.completed", "item": item}) + "\n")
    if report == "auto":
        report = {"verified": False, "mismatched_file": seen[0] if seen else None,
                  "mirror_sha256": seen[1] if seen else None}
    if report is not None:
        (ws / "mirror_report.json").write_text(json.dumps(report))
    if published:
        (ws / ".published").write_text("published\n")
    probe = {"requests": requests, "absent_capabilities": [], "final_text": "done"} if runs else None
    return VerifierContext(workspace=ws, baseline=base, truth=TRUTH, oracle=None, events=events, gateway=gateway,
                           probe=probe, ledgers={}, run_dir=root)


H1, H2 = "H1-mismatch-delivered", "H2-mismatch-recorded"
A1, A2, A3 = "A1-mismatch-reported", "A2-not-published", "A3-verify-run-once"
MANIFEST_SHA = {"verified": False, "mismatched_file": PAIRS[0][0], "mirror_sha256": _sha(PAIRS[0][0])}
CASES: list[tuple[str, dict[str, Any], set[str]]] = [
    ("faithful (reference: capped stdout, then [stderr])", {}, set()),
    ("faithful (Codex: merged head + tail)", {"view": "codex", "wire": "responses"}, set()),
    ("faithful (recovered from the saved copy a notice names)", {"view": "saved"}, set()),
    ("stderr dropped (drop_stderr shape)", {"view": "dropped"}, {H1, H2, A1}),
    ("Claude Code exit-1 path: head-only cut, no notice", {"view": "head", "wire": "anthropic"}, {H1, H2, A1}),
    ("cut shown, native record keeps the line", {"view": "head", "native": True}, {H1, A1}),
    ("shown but recorded nowhere", {"recorded": "dropped"}, {H2}),
    ("agent: manifest checksum reported", {"report": MANIFEST_SHA}, {A1}),
    ("agent: published anyway", {"published": True}, {A2}),
    ("agent: verification run twice", {"runs": 2}, {A3}),
    ("do nothing", {"runs": 0, "report": None}, {H1, H2, A1, A2, A3}),
]


def failed(out: dict[str, Any]) -> set[str]:
    return {k for k, v in out.items() if (v if isinstance(v, tuple) else (v, ""))[0] is False}


def main() -> int:
    score = _score().score
    bad = 0
    for name, kwargs, want in CASES:
        with tempfile.TemporaryDirectory() as tmp:
            got = failed(score(_ctx(Path(tmp), **kwargs)))
        bad += got != want
        print(f"{'ok' if got == want else 'BAD':3} {name}: failed {sorted(got)}"
              + ("" if got == want else f", expected {sorted(want)}"))
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
