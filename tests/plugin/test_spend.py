"""Issue 26 item 5: live runs a user can afford — ``--tt-max-cost USD`` and the ``--tt-estimate`` dry run.

The probe model is free, so the sessions here price it through a catalogue frozen with the output
(``<output>/models.yaml``, which the cost code reads before the repository's): the same code path a
priced live model takes, without a key.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from reports.pricing import PriceCatalogue, PriceEntry
from tests.plugin.test_collection import make_suite
from tests.plugin.test_session import write_suite
from tests.plugin.test_usage_errors import usage_error
from tracetrial.results import Summary
from tracetrial.trace import TokenUsage
from tracetrial_fixtures.spend import (
    TOKENS_PER_CALL,
    SpendLedger,
    cell_cost,
    estimate_cells,
    format_estimate,
    tokens_per_call,
)

pytestmark = pytest.mark.filterwarnings("ignore::pytest.PytestAssertRewriteWarning")

TASK = "E1-build-status-001"
#: USD per million tokens: a reference cell of E1 (a few thousand tokens) costs about a cent.
PRICED_PROBE = "models:\n  probe:\n    kind: probe\n    model: probe\n    price: {input: 2.0, output: 10.0}\n"


# ------------------------------------------------------------------------------- pure parts


def _summary(**fields: object) -> Summary:
    return Summary.model_validate({"run_id": "r", "trace_complete": True, "structured_trace_status": "complete",
                                   **fields})


def test_ledger_sums_known_costs_and_counts_unknown_ones(tmp_path: Path) -> None:
    ledger = SpendLedger(tmp_path, "s1")
    assert ledger.total().cells == 0  # no file yet: nothing spent
    ledger.add("a", 0.25)
    ledger.add("b", None)
    ledger.add("c", 0.5)
    with open(ledger.path, "a", encoding="utf-8") as fh:
        fh.write('{"cell": "d", "us')  # a line cut by a killed worker
    total = ledger.total()
    assert (total.usd, total.cells, total.unknown) == (0.75, 3, 1)
    assert SpendLedger(tmp_path, "s2").total().usd == 0.0  # another session's ledger is its own


def test_cell_cost_prices_the_archived_usage(tmp_path: Path) -> None:
    path = tmp_path / "summary.json"
    path.write_text(_summary(usage=TokenUsage(input_tokens=1_000_000, output_tokens=100_000,
                                                          cache_read_tokens=400_000)).model_dump_json())
    price = PriceEntry(input=2.0, output=10.0, cache_read=0.2)
    assert cell_cost(path, price) == pytest.approx(0.6 * 2.0 + 0.4 * 0.2 + 0.1 * 10.0)
    path.write_text(_summary(usage=None).model_dump_json())
    assert cell_cost(path, price) is None  # unreported usage is unknown, never $0
    assert cell_cost(tmp_path / "missing.json", price) is None


def test_estimate_at_the_budget() -> None:
    prices = PriceCatalogue(entries={"m": PriceEntry(input=1.0, output=5.0)})
    tokens = {"codex": ((10_000, 500), "built-in")}
    rows = estimate_cells([("T1", "codex", "m", 20), ("T2", "codex", "m", 10), ("T1", "codex", "free", 5)],
                          prices, tokens)
    assert rows[0].usd == pytest.approx(20 * (10_000 * 1.0 + 500 * 5.0) / 1e6)
    assert rows[2].usd is None
    lines = format_estimate(rows, cap=1.0)
    assert lines[1].split()[:4] == ["free", "codex", "1", "5"] and lines[1].endswith("no price")
    assert lines[2].split()[:4] == ["m", "codex", "2", "30"] and lines[2].endswith(f"{30 * 0.0125:.2f}")
    assert lines[3].startswith("3 cell(s): at most about $0.38")
    assert lines[4] == "no price in models.yaml for: free (not in the total)"


def test_tokens_per_call_come_from_the_archive_when_it_has_cells(tmp_path: Path) -> None:
    assert tokens_per_call(tmp_path, "codex") == (TOKENS_PER_CALL["codex"], "built-in")
    for i, (tin, calls) in enumerate([(30_000, 3), (40_000, 5), (90_000, 10)]):
        cell = tmp_path / "traces" / f"T{i}" / "probe" / "codex@0.171.0"
        cell.mkdir(parents=True)
        usage = TokenUsage(input_tokens=tin, output_tokens=calls * 20)
        (cell / "summary.json").write_text(_summary(usage=usage, model_calls=calls).model_dump_json())
    (tmp_path / "traces" / "T0" / "probe" / "claude_code").mkdir(parents=True)
    (tin, tout), source = tokens_per_call(tmp_path, "codex")
    assert tin == 9_000 and source == "median of 3 archived cell(s)"
    assert tout == TOKENS_PER_CALL["codex"][1]  # the probe's short answers never lower the output figure


# ------------------------------------------------------------------------------- options


@pytest.mark.parametrize("value", ["0", "-3", "lots", "nan"])
def test_bad_max_cost_is_a_usage_error(pytester: pytest.Pytester, value: str) -> None:
    make_suite(pytester)
    line = usage_error(pytester.runpytest("tasks", "--collect-only", "-q", f"--tt-max-cost={value}"))
    assert line.startswith("ERROR: --tt-max-cost: ") and "US dollars" in line


def test_a_cap_needs_a_price_for_every_model(pytester: pytest.Pytester) -> None:
    make_suite(pytester)
    out = pytester.path / "out"
    out.mkdir()
    (out / "models.yaml").write_text("models:\n  probe:\n    kind: probe\n    model: probe\n", encoding="utf-8")
    line = usage_error(pytester.runpytest("tasks", "--collect-only", "-q", "--tt-max-cost=1",
                                          f"--tt-output={out}"))
    assert "no price in models.yaml for probe" in line


def test_estimate_is_a_dry_run(pytester: pytest.Pytester) -> None:
    make_suite(pytester, "O1-ticket-error-001")
    out = pytester.path / "out"
    out.mkdir()
    (out / "models.yaml").write_text(PRICED_PROBE, encoding="utf-8")
    result = pytester.runpytest("tasks", "--tt-estimate", "--tt-harness=reference,codex", f"--tt-output={out}",
                                "-n", "2")
    assert result.ret == pytest.ExitCode.OK
    text = "\n".join(result.outlines)
    assert "TraceTrial estimate (--tt-estimate: nothing ran)" in text
    # E1 and O1 both budget 12 model calls; 4000+600 tokens a call for the reference, 12000+600 for codex
    assert any(line.split()[:4] == ["probe", "codex", "2", "24"] and line.endswith(f"{24 * 0.03:.2f}")
               for line in result.outlines), text
    assert any(line.split()[:4] == ["probe", "reference", "2", "24"] for line in result.outlines), text
    assert "4 cell(s): at most about $" in text
    assert not (out / "traces").exists()  # nothing ran


# ------------------------------------------------------------------------------- a capped session


@pytest.fixture(scope="module")
def capped(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, str]:
    """Three E1 cells on the reference harness with a cap the first cell alone exceeds."""
    root = tmp_path_factory.mktemp("capped-run")
    write_suite(root)
    out = root / "out"
    out.mkdir()
    (out / "models.yaml").write_text(PRICED_PROBE, encoding="utf-8")
    harnesses = "reference,reference+hide_exit_code,reference+drop_stderr"
    proc = subprocess.run([sys.executable, "-m", "pytest", "tasks", "-p", "no:cacheprovider", "--tt-sandbox=local",
                           f"--tt-harness={harnesses}", f"--tt-output={out}", "--tt-max-cost=0.0001"],
                          cwd=root, env={**os.environ, "COLUMNS": "120", "TT_NO_REPORTS": "1"},
                          capture_output=True, text=True, timeout=900, check=False)
    return out, proc.stdout + proc.stderr


def test_cells_stop_starting_once_the_cap_is_reached(capped: tuple[Path, str]) -> None:
    out, text = capped
    cells = sorted(p.name for p in (out / "traces" / TASK / "probe").iterdir())
    assert cells == ["reference"], text[-3000:]  # the first cell ran, the other two never started
    skipped = [ln for ln in text.splitlines() if ln.startswith("[tt] ") and "skipped: --tt-max-cost reached" in ln]
    assert len(skipped) == 2, text[-3000:]
    (ledger,) = (out / "spend").iterdir()
    entries = [json.loads(line) for line in ledger.read_text(encoding="utf-8").splitlines()]
    summary = Summary.model_validate_json((out / "traces" / TASK / "probe" / "reference" / "summary.json").read_bytes())
    assert summary.usage is not None and summary.usage.input_tokens
    expected = (summary.usage.input_tokens * 2.0 + (summary.usage.output_tokens or 0) * 10.0) / 1e6
    assert [e["cell"] for e in entries] == [f"{TASK}-reference-probe"]
    assert entries[0]["usd"] == pytest.approx(expected)
    assert f"spent this session: ${expected:.4f} of --tt-max-cost $0.0001 over 1 cell(s)" in text
    assert "2 cell(s) not started: the cap was reached" in text


def test_the_cell_line_shows_a_priced_cells_cost(capped: tuple[Path, str]) -> None:
    _, text = capped
    (line,) = [ln for ln in text.splitlines() if ln.startswith(f"[tt] {TASK} reference probe $")]
    assert "S 100.0" in line
