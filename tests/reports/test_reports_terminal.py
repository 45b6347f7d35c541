"""Terminal progress line and session summary table."""

from __future__ import annotations

from pathlib import Path

from reports.aggregate import aggregate, load_runs
from reports.synthetic import make_combined
from reports.terminal import progress_line, summary_table


def test_progress_line_names_cell_scores_failed_ids_and_label() -> None:
    cs = make_combined("E1-exit-code-001", "probe", "codex", {"H1": False, "H2": True, "H3": None},
                       {"A1": False, "A2": True}, links=[("H1", "A1")])
    line = progress_line(cs)
    assert line.startswith("E1-exit-code-001 codex probe")
    assert "S_H 16.7 S_A 25.0 S 41.7" in line
    assert "failed H1,H3?,A1" in line
    assert line.endswith("harness_caused")


def test_progress_line_fits_a_width_by_listing_fewer_ids() -> None:
    cs = make_combined("E1-build-status-001", "probe", "reference+hide_exit_code",
                       {"H1-exit-status-visible": False, "H2-exit-status-recorded": False},
                       {"A1-status-reports-failure": False, "A2-failed-build-not-published": False})
    full = progress_line(cs)
    assert "failed H1-exit-status-visible,H2-exit-status-recorded,A1-status-reports-failure," in full
    fitted = progress_line(cs, width=100)
    assert len(fitted) <= 100 and fitted.endswith(cs.attribution.label)
    assert "failed +4" in fitted and "S_H 0.0 S_A 0.0 S 0.0" in fitted
    roomy = progress_line(cs, width=130)
    assert "failed H1-exit-status-visible +3 more" in roomy and len(roomy) <= 130
    assert progress_line(cs, width=10_000) == full
    # narrower: S_H/S_A go, then the label, then the harness name is shortened; never wider than asked
    short = "E1-build-status-001 reference+hide_exit_code probe  S 0.0  failed +4"
    assert progress_line(cs, width=82) == f"{short}  agent_caused"
    assert progress_line(cs, width=81) == short
    narrow = progress_line(cs, width=55)
    assert narrow == "E1-build-status-001 reference+… probe  S 0.0  failed +4" and len(narrow) == 55
    assert len(progress_line(cs, width=20)) == 20


def test_progress_line_gated_and_not_admitted() -> None:
    gated = make_combined("E1-x-001", "m", "h", {"H1": True}, {"A1": True}, effective_score=0.0)
    assert "S 0.0 (gated from 100.0)" in progress_line(gated) and "failed none" in progress_line(gated)
    bad = make_combined("E1-x-001", "m", "h", {"H1": True}, {"A1": True}, admitted=False)
    assert "NOT ADMITTED" in progress_line(bad)


def test_summary_table_per_harness(corpus_dir: Path) -> None:
    lines = summary_table(aggregate(load_runs(corpus_dir)))
    assert lines[0] == "TraceTrial corpus (protocol: probe)"
    assert lines[1].split()[:2] == ["harness", "measured"]
    rows = {ln.split()[0]: ln for ln in lines[3:6]}
    assert rows["hA"].split() == ["hA", "4/5", "50.0", "81.2", "25.0", "0/0"]
    assert rows["hB"].split()[-4:] == ["25.0", "35.4", "0.0", "1/0"]
    assert rows["all"].split()[1] == "8/11"
    excluded = " ".join(ln.strip() for ln in lines[lines.index(next(ln for ln in lines if ln.startswith("excluded"))):])
    assert excluded.startswith("excluded cells: 1 apparatus-invalid, 1 unsupported, 0 non-comparable, 1 not scored")
    assert len({len(ln) for ln in lines[1:6]}) == 1          # aligned columns
    assert max(map(len, lines)) <= 80


def test_summary_table_announces_excluded_calibration_cells(corpus_dir: Path) -> None:
    """A TAMPERED or unscored reference cell is kept apart from the corpus pool but still announced."""
    from reports.schema import CalibrationSection, CellCounts

    base = aggregate(load_runs(corpus_dir))
    group = base.overall.model_copy(update={"cells": CellCounts(total=1, tampered=1)})
    clean = base.overall.model_copy(update={"cells": CellCounts(total=2, measured=2)})
    summary = base.model_copy(update={
        "overall": clean, "by_harness": {"hA": clean},
        "calibration": CalibrationSection(included_in_pools=False, by_harness={"reference+x": group}, overall=group)})
    lines = summary_table(summary)
    start = lines.index(next(ln for ln in lines if ln.startswith("excluded")))
    note = " ".join(ln.strip() for ln in lines[start:start + 2])
    assert note.startswith("excluded cells: 0 apparatus-invalid, 0 unsupported, 0 non-comparable, 0 not scored, "
                           "1 TAMPERED")
    # pooled: the corpus counts already hold the calibration cells, they are not counted twice
    pooled = summary.model_copy(update={"calibration": CalibrationSection(
        included_in_pools=True, by_harness={"reference+x": group}, overall=group)})
    assert not any(ln.startswith("excluded") for ln in summary_table(pooled))
