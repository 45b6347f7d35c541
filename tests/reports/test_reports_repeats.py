"""Issue 24 item 4 (reports side): repeated cells archived side by side, pass^k / pass@k per
harness, component and task, and the agreement of repetitions.

Hand-computed archive (model ``m1``, probe), repetition i under ``repeats/rep-<i>/`` (i ≥ 2):

    hA E1-a-001  reps 1-3: pass, pass, H1 failed (S 75)   n=3 c=2: pass^1 2/3, pass^2 1/3, pass^3 0, pass@3 1
    hA E1-b-001  reps 1-3: pass                           n=3 c=3: 1, 1, 1; pass@3 1
    hB C1-a-001  reps 1-2 pass, rep 3 not scored          n=2 c=2: pass^1 1, pass^2 1, pass^3 —
    reference E1-a-001 reps 1-3 pass                      (listed per harness, not in "All")
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path

import pytest

from reports import write_reports
from reports.aggregate import aggregate, load_runs
from reports.export.write import atif_path, cell_dirs
from reports.repeats import agreement_label, pass_at, pass_hat
from reports.synthetic import make_combined, write_cell
from reports.tables import repeats_by_harness
from reports.terminal import summary_table
from tracetrial.archive import repetition_of, repetition_root, repetition_roots

T, F = True, False


def _run(out: Path, rep: int, task: str, harness: str, h1: bool = True) -> None:
    cs = make_combined(task, "m1", harness, {"H1": h1, "H2": True}, {"A1": True})
    write_cell(repetition_root(out, rep), cs)


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("repeats") / "out"
    for rep in (1, 2, 3):
        _run(out, rep, "E1-a-001", "hA", h1=rep != 3)
        _run(out, rep, "E1-b-001", "hA")
        _run(out, rep, "E1-a-001", "reference")
        if rep < 3:
            _run(out, rep, "C1-a-001", "hB")
    write_cell(repetition_root(out, 3), None, task_id="C1-a-001", model="m1", harness="hB", status="failed")
    (out / "repeats" / "notes").mkdir()                     # not a repetition: left alone
    return out


def test_estimators_by_hand() -> None:
    assert pass_hat(5, 3, 1) == pytest.approx(3 / 5) and pass_at(5, 3, 1) == pytest.approx(3 / 5)
    assert pass_hat(5, 3, 2) == pytest.approx(3 / 10)        # C(3,2)/C(5,2)
    assert pass_at(5, 3, 2) == pytest.approx(9 / 10)         # 1 - C(2,2)/C(5,2)
    assert pass_hat(3, 2, 3) == 0.0 and pass_at(3, 2, 3) == 1.0
    assert pass_at(4, 0, 4) == 0.0
    with pytest.raises(ValueError):
        pass_hat(2, 2, 3)
    with pytest.raises(ValueError):
        pass_at(2, 3, 1)


def test_layout_is_read_side_by_side(archive: Path) -> None:
    assert [r for r, _ in repetition_roots(archive)] == [1, 2, 3]
    runs = load_runs(archive)
    assert len(runs) == 12
    rel = {(r.task_id, r.harness, r.repetition): r.rel_path for r in runs}
    assert rel[("E1-a-001", "hA", 1)] == "traces/E1-a-001/m1/hA"
    assert rel[("E1-a-001", "hA", 3)] == "repeats/rep-3/traces/E1-a-001/m1/hA"
    assert repetition_of(archive / rel[("E1-a-001", "hA", 3)]) == 3
    assert repetition_of(archive / rel[("E1-a-001", "hA", 1)]) == 1


def test_pass_k_per_harness_component_and_task(archive: Path) -> None:
    r = aggregate(load_runs(archive)).repeats
    assert r is not None and r.k == 3 and r.agreement_label == "determinism"
    hA = r.by_harness["hA"].combined
    assert hA.cells == 2
    assert hA.pass_hat[0] == pytest.approx(100 * (2 / 3 + 1) / 2)
    assert hA.pass_hat[1] == pytest.approx(100 * (1 / 3 + 1) / 2)
    assert hA.pass_hat[2] == pytest.approx(50.0) and hA.pass_at[2] == pytest.approx(100.0)
    hB = r.by_harness["hB"]
    assert hB.runs_not_measured == 1 and hB.combined.pass_hat == [100.0, 100.0, None]
    assert r.by_task["E1-a-001"]["hA"].combined.pass_hat == pytest.approx([100 * 2 / 3, 100 / 3, 0.0])
    assert set(r.by_task["E1-a-001"]) == {"hA", "reference"}
    assert r.by_component["E"].combined.cells == 2          # hA's two E cells; reference not pooled
    assert r.overall.combined.cells == 3 and "reference" in r.by_harness


def test_agreement_of_repetitions(archive: Path) -> None:
    r = aggregate(load_runs(archive)).repeats
    assert r is not None
    a = r.by_harness["hA"].agreement
    assert (a.cells, a.identical, a.pct) == (2, 1, 50.0)
    assert (a.criteria, a.criteria_agreeing) == (6, 5) and a.flipping == {"H1": 1}
    sd_a = math.sqrt(((100 - 275 / 3) ** 2 * 2 + (75 - 275 / 3) ** 2) / 3)
    assert a.mean_score_sd == pytest.approx(sd_a / 2)
    assert r.by_harness["reference"].agreement.pct == 100.0
    assert agreement_label(["live"]) == "noise floor" and agreement_label(["live", "probe"]) == "agreement"


def test_pools_and_tables_count_every_repetition(archive: Path) -> None:
    s = aggregate(load_runs(archive))
    assert s.by_harness["hA"].runs == 6 and s.by_harness["hB"].cells.total == 3
    assert {c.repetition for c in s.cells} == {1, 2, 3}
    t = repeats_by_harness(s)
    assert t.headers[3:6] == ["pass^1", "pass^3", "pass@3"]
    assert t.rows[0][:6] == ["hA", "2", "0", "83.3", "50.0", "100.0"]
    assert t.rows[-1][0] == "All"
    lines = summary_table(s)
    at = lines.index("repeated runs (up to 3 per cell; a run passes at S = 100):")
    assert lines[at + 1].split() == ["harness", "cells", "pass^1", "pass^3", "pass@3", "determinism", "%"]
    assert lines[at + 3].split() == ["hA", "2", "83.3", "50.0", "100.0", "50.0", "(1/2)"]
    assert max(map(len, lines)) <= 80


def test_reports_link_every_repetition(archive: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    shutil.copytree(archive, out)
    paths = write_reports(out)
    assert [p.relative_to(out / "reports").as_posix() for p in paths.pages] == [
        "cells/repeats/rep-3/traces/E1-a-001/m1/hA.html"]
    html = paths.html.read_text(encoding="utf-8")
    assert 'href="../repeats/rep-3/traces/E1-a-001/m1/hA/events.json"' in html
    assert "pass^3" in html and "determinism" in html


def test_single_run_output_has_no_repeat_section(corpus_dir: Path) -> None:
    assert aggregate(load_runs(corpus_dir)).repeats is None


def test_exports_cover_every_repetition(archive: Path) -> None:
    dirs = cell_dirs(archive)
    assert len(dirs) == 12
    rep3 = archive / "repeats" / "rep-3" / "traces" / "E1-a-001" / "m1" / "hA"
    assert atif_path(archive, rep3) == archive / "exports" / "atif" / "repeats" / "rep-3" / "E1-a-001" / "m1" / "hA" / "trajectory.json"
    first = archive / "traces" / "E1-a-001" / "m1" / "hA"
    assert atif_path(archive, first, Path("/x")) == Path("/x/E1-a-001/m1/hA/trajectory.json")
