"""The version-diff section (issue 18 item 4): for each harness run at two or more versions
in one output, the criteria whose verdict flips between versions, per task."""

from __future__ import annotations

from pathlib import Path

from reports import write_reports
from reports.aggregate import aggregate, load_runs
from reports.synthetic import make_combined, write_cell
from reports.versions import version_key


def _cell(out: Path, task: str, harness: str, version: str, h: dict[str, bool | None],
          a: dict[str, bool | None], **kw: object) -> None:
    cs = make_combined(task, "probe", harness, h, a)
    cs.identity.harness_version = version
    write_cell(out, cs, **kw)  # type: ignore[arg-type]


def corpus(out: Path) -> Path:
    # claude_code (pin 2.1.220) vs claude_code@2.1.332: H2 flips on E1, A1 appears only in the new one.
    _cell(out, "E1-x-001", "claude_code", "2.1.220", {"H1": True, "H2": True}, {"A1": True})
    _cell(out, "E1-x-001", "claude_code@2.1.332", "2.1.332", {"H1": True, "H2": False}, {"A1": True})
    _cell(out, "C1-y-001", "claude_code", "2.1.220", {"H1": True}, {"A1": True})
    _cell(out, "C1-y-001", "claude_code@2.1.332", "2.1.332", {"H1": True}, {"A1": True, "A2": None})
    # Run under one version only: not compared.
    _cell(out, "T3-z-001", "claude_code", "2.1.220", {"H1": False}, {"A1": True})
    # codex: the named version's cell was not measured (unsupported).
    _cell(out, "E1-x-001", "codex", "0.145.0", {"H1": True}, {"A1": True})
    write_cell(out, None, task_id="E1-x-001", model="probe", harness="codex@0.171.0", eligibility="unsupported",
               eligibility_reason="no MCP")
    # A harness at one version only: no diff for it.
    _cell(out, "E1-x-001", "reference", "0.1", {"H1": True}, {"A1": True})
    return out


def test_version_order_puts_the_pin_first() -> None:
    names = ["codex@0.99.0", "codex@0.171.0", "codex", "codex@0.171.0rc1"]
    assert sorted(names, key=version_key) == ["codex", "codex@0.99.0", "codex@0.171.0", "codex@0.171.0rc1"]


def test_flips_per_harness_task_and_criterion(tmp_path: Path) -> None:
    summary = aggregate(load_runs(corpus(tmp_path)))
    diffs = {d.harness: d for d in summary.version_diff}
    assert sorted(diffs) == ["claude_code", "codex"]
    cc = diffs["claude_code"]
    assert cc.versions == {"claude_code": "2.1.220", "claude_code@2.1.332": "2.1.332"}
    assert cc.cells_compared == 2
    flips = {(f.task_id, f.criterion): f for f in cc.flips}
    assert sorted(flips) == [("C1-y-001", "A2"), ("E1-x-001", "H2")]
    assert flips[("E1-x-001", "H2")].states == {"claude_code": "pass", "claude_code@2.1.332": "fail"}
    assert flips[("E1-x-001", "H2")].layer == "harness"
    assert flips[("C1-y-001", "A2")].states == {"claude_code": "absent", "claude_code@2.1.332": "unscored"}
    (status,) = diffs["codex"].flips
    assert status.criterion == "status" and status.layer is None
    assert status.states == {"codex": "measured", "codex@0.171.0": "unsupported"}


def test_reports_show_the_section_only_when_versions_differ(tmp_path: Path) -> None:
    paths = write_reports(corpus(tmp_path / "a"))
    md = paths.summary_md.read_text(encoding="utf-8")
    assert "## Version diff (3 flips)" in md
    assert ("| claude_code | E1-x-001 | probe | H2 | harness | claude_code (2.1.220): pass → claude_code@2.1.332: "
            "fail |") in md
    assert "claude_code: claude_code (2.1.220) vs claude_code@2.1.332 on 2 task × model pair(s), 2 flip(s)" in md
    html = paths.html.read_text(encoding="utf-8")
    assert '<h2 id="version_diff">Version diff (3 flips)</h2>' in html and 'href="#version_diff"' in html
    # The named version's archive folder carries name@version.
    assert (tmp_path / "a" / "traces" / "E1-x-001" / "probe" / "claude_code@2.1.332" / "result.json").is_file()
    assert not any(c.problems for c in load_runs(tmp_path / "a"))

    one = tmp_path / "b"
    _cell(one, "E1-x-001", "claude_code", "2.1.220", {"H1": True}, {"A1": True})
    paths = write_reports(one)
    assert paths.summary.version_diff == []
    assert "Version diff" not in paths.summary_md.read_text(encoding="utf-8")
    assert "version_diff" not in paths.html.read_text(encoding="utf-8")
