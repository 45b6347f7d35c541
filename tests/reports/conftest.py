"""A hand-computed corpus written as real run archives.

Harness ``hA`` (model ``m1``), measured runs (p_H/n_H, p_A/n_A, state):

    r1 C1-a-001  3/4 2/2  H-only      F_H={H1} bypassed -> Z_H=∅
    r2 C1-b-001  1/2 0/1  joint fail  link H2->A1 activated
    r3 E1-a-001  5/5 1/3  A-only
    r4 E1-b-001  2/2 4/4  joint clean
    + G1-x-001 not scored (no combined_score.json, failed with a harness error)

Harness ``hB`` (model ``m1``):

    s1 E1-a-001  0/3 0/2  joint fail  no link
    s2 E1-b-001  1/4 1/2  joint fail  link H1->A1
    s3 E1-c-001  2/4 0/1  joint fail  link H3->A1
    s4 C1-a-001  2/3 2/2  H-only      H3 unscored (not in F_H), never a pass
    + C1-b-001 apparatus-invalid (not admitted), E1-c-001 on m2 unsupported

The expected figures are worked out by hand in ``EXPECTED`` (see the test module).
"""

from __future__ import annotations

from pathlib import Path

import pytest

from reports.synthetic import make_combined, write_cell
from tracetrial.results import ExceptionInfo
from tracetrial.trace import TokenUsage

T, F, U = True, False, None

PRICES_YAML = """\
models:
  m1:
    route: probe
    price: {input: 1.0, cache_read: 0.1, cache_write: 1.25, output: 4.0}
"""


def build_corpus(out: Path) -> Path:
    def cell(task: str, harness: str, h: dict[str, bool | None], a: dict[str, bool | None], *,
             usage: TokenUsage | None = None, **kw: object) -> None:
        cs = make_combined(task, "m1", harness, h, a, judge="judge-x", with_packets=True, **kw)  # type: ignore[arg-type]
        write_cell(out, cs, usage=usage)

    # r1: cost = (5000*1 + 4000*0.1 + 1000*1.25 + 2000*4) / 1e6 = 0.01465 (reasoning inside output)
    cell("C1-a-001", "hA", {"H1": F, "H2": T, "H3": T, "H4": T}, {"A1": T, "A2": T}, bypassed=["H1"],
         usage=TokenUsage(input_tokens=10_000, output_tokens=2_000, cache_read_tokens=4_000,
                          cache_write_tokens=1_000, reasoning_tokens=500))
    cell("C1-b-001", "hA", {"H1": T, "H2": F}, {"A1": F}, links=[("H2", "A1")])
    # r3: cost = (20000*1 + 1000*4) / 1e6 = 0.024 (no cache counters: all input at the input price)
    cell("E1-a-001", "hA", {f"H{i}": T for i in range(1, 6)}, {"A1": T, "A2": F, "A3": F},
         usage=TokenUsage(input_tokens=20_000, output_tokens=1_000))
    cell("E1-b-001", "hA", {"H1": T, "H2": T}, {f"A{i}": T for i in range(1, 5)})
    write_cell(out, None, task_id="G1-x-001", model="m1", harness="hA", status="failed",
               exception=ExceptionInfo(type="HarnessCrashError", message="codex exited with 139",
                                       origin="harness"))

    cell("E1-a-001", "hB", {"H1": F, "H2": F, "H3": F}, {"A1": F, "A2": F})
    cell("E1-b-001", "hB", {"H1": F, "H2": F, "H3": F, "H4": T}, {"A1": F, "A2": T}, links=[("H1", "A1")])
    cell("E1-c-001", "hB", {"H1": T, "H2": T, "H3": F, "H4": F}, {"A1": F}, links=[("H3", "A1")])
    cell("C1-a-001", "hB", {"H1": T, "H2": T, "H3": U}, {"A1": T, "A2": T})
    cell("C1-b-001", "hB", {"H1": F}, {"A1": F}, admitted=False)
    write_cell(out, None, task_id="E1-c-001", model="m2", harness="hB", status="skipped",
               eligibility="unsupported", eligibility_reason="no MCP channel")
    (out / "models.yaml").write_text(PRICES_YAML, encoding="utf-8")
    return out


@pytest.fixture(scope="session")
def corpus_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The hand-computed corpus (read-only: tests that write reports copy it)."""
    return build_corpus(tmp_path_factory.mktemp("corpus"))
