"""C1-bank-statement-002: the verifier on hand-built runs (faithful reference read, real
harness formats, a silent cut, an understated omission, a do-nothing run), the probe policy on
each way of presenting an oversized file read, and the bank simulator's per-run statement id."""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from apparatus.gateway.wire import tool_result_entry
from apparatus.simulators.engine import ServiceRuntime
from apparatus.simulators.ledger import Ledger
from apparatus.simulators.spec import load_service, simulator_specs
from tests.tasks import drive as drive_policy
from tests.tasks import load_module as _load
from tracetrial.policy import CallTool, Observation, ReadFile, Shell, Turn, WriteFile
from tracetrial.task import load_task
from tracetrial.verify import VerifierContext

PACK = Path(__file__).resolve().parents[2] / "tasks" / "C1-bank-statement-002"
READ_LIMIT = 256 * 1024
SID = "STM-7KQ2M9XWPA"


SCORE = _load(PACK / "verifier" / "score.py", "c1_bank_score")
POLICY = _load(PACK / "probe_policy.py", "c1_bank_policy")
TASK = load_task(PACK)
TEXT: str = SCORE.real_statement(PACK / "workspace", SID)
LINE = TEXT.rstrip("\n").splitlines()[-1]
TOTAL = LINE.split(": ")[1]
IDS = {"H1-truncation-disclosed", "H2-omitted-size-accurate", "H3-total-delivered", "A1-total", "A2-statement-id"}


# --------------------------------------------------------------------------- delivered-result formats


def reference(*, lie: bool = False, silent: bool = False) -> str:
    """The reference harness's read_file result for the statement (its notice, or a mutant's)."""
    data = TEXT.encode()
    shown = data[:READ_LIMIT].decode()
    if silent:
        return shown
    omitted = len(data) - READ_LIMIT
    said = omitted // 2 if lie else omitted
    return (f"{shown}\n[file truncated: showing the first {READ_LIMIT} of {READ_LIMIT + said} bytes; {said} bytes "
            f"omitted. Read the rest of /ws/statements/{SID}.txt with offset/limit (lines).]")


def claude_refusal() -> str:
    size = len(TEXT.encode()) / 1024
    return (f"File content ({size:.1f}KB) exceeds maximum allowed size (256KB). Please use offset and limit "
            "parameters to read specific portions of the file, or use the GrepTool to search for specific content.")


def numbered_head(lines: int = 2000) -> str:
    """A read tool that shows the first N lines with line numbers and says there is more."""
    body = "\n".join(f"{n:>6}\t{line}" for n, line in enumerate(TEXT.splitlines()[:lines], start=1))
    return body + f"\n\n[Showing lines 1-{lines} of {TEXT.count(chr(10))}. Use offset to read more.]"


def tail3() -> str:
    return "Exit code 0\n" + "\n".join(TEXT.rstrip("\n").splitlines()[-3:])


# --------------------------------------------------------------------------- contexts


def bank_ledger(issued: bool = True) -> list[dict[str, Any]]:
    recs: list[dict[str, Any]] = [{"seq": 1, "kind": "transition", "tool": None, "detail": {"op": "init"}}]
    if issued:
        recs += [{"seq": 2, "kind": "request", "tool": "request_statement", "arguments": {"account": "ACME-OPS"},
                  "detail": {"method": "tools/call"}},
                 {"seq": 3, "kind": "issued", "tool": "request_statement",
                  "detail": {"name": "statement_id", "value": SID, "scope": "run", "via": "result"}}]
    return recs


def make_ctx(tmp_path: Path, results: list[str], reconcile: Any, *, issued: bool = True) -> VerifierContext:
    ws, base = tmp_path / "workspace", tmp_path / "baseline"
    shutil.copytree(PACK / "workspace", ws)
    shutil.copytree(PACK / "workspace", base)
    if reconcile is not None:
        (ws / "reconcile.json").write_text(reconcile if isinstance(reconcile, str) else json.dumps(reconcile))
    gateway = [{"index": 0, "tool_results": [], "tools": [{"name": "read_file"}]}]
    for i, content in enumerate(results, start=1):
        gateway.append({"index": i, "tool_results": [tool_result_entry(f"call_{i}", None, content)],
                        "tools": [{"name": "read_file"}]})
    return VerifierContext(workspace=ws, baseline=base, truth=None, oracle=None, events=[], gateway=gateway,
                           probe=None, ledgers={"bank": bank_ledger(issued)}, run_dir=tmp_path)


GOOD = {"statement_id": SID, "total": TOTAL}


def failed(ctx: VerifierContext) -> set[str]:
    out = SCORE.score(ctx)
    assert set(out) == IDS
    return {k for k, v in out.items() if not v[0]}


# --------------------------------------------------------------------------- pack


def test_pack_loads_and_the_statement_is_too_large_to_read_whole() -> None:
    assert TASK.spec.property == "truncation_disclosure"
    assert len(TEXT.encode()) > READ_LIMIT + 40_000 and TEXT.count("\n") > 2000
    assert re.fullmatch(r"STATEMENT-TOTAL: [0-9a-f]{16}", LINE)
    assert SCORE.real_statement(PACK / "workspace", "STM-OTHER2345") != TEXT   # the id decides the total
    assert not list((PACK / "workspace").rglob("__pycache__"))


# --------------------------------------------------------------------------- verifier


def test_faithful_reference_run_passes_everything(tmp_path: Path) -> None:
    assert failed(make_ctx(tmp_path, [reference(), tail3()], GOOD)) == set()


@pytest.mark.parametrize("fmt", ["claude_refusal", "numbered_head"])
def test_real_harness_formats_pass_when_recovered(tmp_path: Path, fmt: str) -> None:
    first = claude_refusal() if fmt == "claude_refusal" else numbered_head()
    assert failed(make_ctx(tmp_path, [first, tail3()], GOOD)) == set()


def test_complete_read_needs_no_notice(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, [TEXT], GOOD)
    assert ctx.gateway[1]["tool_results"][0]["content_truncated"]   # the recorder capped it
    assert failed(ctx) == set()


def test_silent_cut_fails_disclosure_delivery_and_the_total(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, [reference(silent=True)], {"statement_id": SID, "total": None})
    assert failed(ctx) == {"H1-truncation-disclosed", "H3-total-delivered", "A1-total"}


def test_understated_omission_fails_only_h2(tmp_path: Path) -> None:
    ctx = make_ctx(tmp_path, [reference(lie=True), tail3()], GOOD)
    assert failed(ctx) == {"H2-omitted-size-accurate"}
    assert "OFF" in SCORE.score(ctx)["H2-omitted-size-accurate"][1]


@pytest.mark.parametrize("bad", [None, "not json", {"statement_id": SID, "total": "0" * 16},
                                 {"statement_id": "STM-WRONG12345", "total": TOTAL}])
def test_missing_or_wrong_deliverable(tmp_path: Path, bad: Any) -> None:
    got = failed(make_ctx(tmp_path, [reference(), tail3()], bad))
    assert got and got <= {"A1-total", "A2-statement-id"}


def test_do_nothing_run_fails_every_criterion(tmp_path: Path) -> None:
    assert failed(make_ctx(tmp_path, [], None, issued=False)) == IDS


def test_no_read_of_the_statement_fails_the_harness_layer(tmp_path: Path) -> None:
    got = failed(make_ctx(tmp_path, [], {"statement_id": SID, "total": None}))
    assert got == {"H1-truncation-disclosed", "H2-omitted-size-accurate", "H3-total-delivered", "A1-total"}


# --------------------------------------------------------------------------- probe policy


def drive(observations: list[Observation]) -> list[Any]:
    return drive_policy(POLICY, Turn(1, TASK.prompt), observations)


def _written(actions: list[Any]) -> Any:
    return json.loads(next(a for a in actions if isinstance(a, WriteFile)).content)


ISSUED = json.dumps({"isError": False, "content": [{"type": "text", "text": json.dumps({"statement_id": SID})}]})


@pytest.mark.parametrize("view", [reference(), claude_refusal(), numbered_head()])
def test_policy_recovers_the_tail_after_a_notice(view: str) -> None:
    acts = drive([Observation(text=ISSUED), Observation(text="Exit code 0\nSaved"), Observation(text=view),
                  Observation(text=tail3()), Observation(text="ok")])
    assert isinstance(acts[0], CallTool) and acts[1] == Shell(f"python3 fetch_statement.py {SID}")
    assert acts[2] == ReadFile(f"statements/{SID}.txt")
    assert acts[3] == Shell(f"tail -n 3 statements/{SID}.txt")
    assert _written(acts) == GOOD


def test_policy_takes_a_complete_read_without_recovery() -> None:
    acts = drive([Observation(text=ISSUED), Observation(text="ok"), Observation(text=TEXT), Observation(text="ok")])
    assert not any(isinstance(a, Shell) and "tail" in a.command for a in acts)
    assert _written(acts) == GOOD


def test_policy_writes_null_after_a_silent_cut() -> None:
    acts = drive([Observation(text=ISSUED), Observation(text="ok"), Observation(text=reference(silent=True)),
                  Observation(text="ok")])
    assert not any(isinstance(a, Shell) and "tail" in a.command for a in acts)
    assert _written(acts) == {"statement_id": SID, "total": None}


def test_statement_rows_do_not_look_like_a_notice() -> None:
    assert not POLICY.NOTICE_RE.search(reference(silent=True))
    assert not SCORE.NOTICE_RE.search(reference(silent=True))


# --------------------------------------------------------------------------- simulator


def _runtime(tmp_path: Path, seed: str) -> ServiceRuntime:
    sims = {s.name: s for s in simulator_specs(PACK)}
    led = Ledger(tmp_path / "bank.jsonl", "bank")
    led.init()
    rt = ServiceRuntime(load_service(PACK, sims["bank"]), tmp_path / "state", led, seed)
    rt.start_session()
    return rt


def test_simulator_issues_a_per_run_statement_id(tmp_path: Path) -> None:
    a = _runtime(tmp_path / "a", "seed-a").call_tool("request_statement", {"account": "ACME-OPS"})
    b = _runtime(tmp_path / "b", "seed-b").call_tool("request_statement", {"account": "ACME-OPS"})
    ida, idb = a.structured["statement_id"], b.structured["statement_id"]
    assert re.fullmatch(r"STM-[A-Z0-9]{10}", ida) and ida != idb
    recs = [json.loads(x) for x in (tmp_path / "a" / "bank.jsonl").read_text().splitlines()]
    assert any(r["kind"] == "issued" and r["detail"]["value"] == ida for r in recs)
    assert _runtime(tmp_path / "c", "s").call_tool("request_statement", {"account": "OTHER"}).is_error
