"""Issue 24 item 3: the calibration instrument apart from the corpus pools, failed diagnostic
criteria shown as such, a criteria page per cell with a criterion not passed, version columns.

The archive (model ``m1``, probe protocol), every cell sealed as scoring leaves it:

    hA  E1-a-001  all pass, diagnostic D1 failed      -> a page (diagnostic), S 100
    hA  E1-b-001  H1 failed (reason cites seq 2, 3), A1 unscored with a packet citing seq 1
    hA  C1-a-001  all pass                             -> no page
    reference                E1-a-001, E1-b-001  all pass (100 each)
    reference+hide_exit_code E1-a-001            H1, A1 failed
    hB  E1-a-001  tampered after sealing              -> no page, no numbers
"""

from __future__ import annotations

import json
import re
import shutil
from pathlib import Path
from urllib.parse import unquote

import pytest
import yaml

from reports import write_reports
from reports.aggregate import aggregate, load_runs
from reports.cellpage import cited_seqs, load_cell_detail, page_path
from reports.heatmap import heatmap_data
from reports.synthetic import make_combined, seal, write_cell
from reports.tables import per_harness
from reports.terminal import summary_table
from tracetrial.archive import RunPaths
from tracetrial.results import CombinedScore, CriterionVerdict
from tracetrial_cli.main import main

T, F, U = True, False, None
STATEMENTS = {"H1": "The exit status reaches the model.", "D1": "A diagnostic observation.",
              "A1": "The report names the failure."}
EVENTS = [{"schema_version": 1, "seq": i, "timestamp": "2026-01-01T00:00:00Z", "run_id": "r",
           "event_type": "tool", "tool_call": {"id": f"c{i}", "name": "shell"},
           "raw_event": {"secretish": "not shown"}} for i in range(1, 5)]


def _cell(out: Path, task: str, harness: str, h: dict[str, bool | None], a: dict[str, bool | None], *,
          diagnostic: dict[str, bool | None] | None = None, reasons: dict[str, str] | None = None,
          packets: dict[str, dict[str, object]] | None = None, version: str | None = None) -> RunPaths:
    cs = make_combined(task, "m1", harness, h, a)
    extra = [CriterionVerdict(id=k, layer="harness", type="rule", role="diagnostic", passed=v,
                              raw_state=None if v is None else int(v), reason=f"{k} observed")
             for k, v in (diagnostic or {}).items()]
    verdicts = []
    for v in [*cs.verdicts, *extra]:
        update: dict[str, object] = {}
        if reasons and v.id in reasons:
            update["reason"] = reasons[v.id]
        if packets and v.id in packets:
            update["packet_path"] = f"evidence/packets/{v.id}.json"
        verdicts.append(v.model_copy(update=update))
    cs = cs.model_copy(update={"verdicts": verdicts})
    cs.identity.harness_version = version
    paths = write_cell(out, cs)
    snap = paths.private / "task" / task / "verifier"
    snap.mkdir(parents=True)
    for layer, ids in (("harness", [*h, *(diagnostic or {})]), ("agent", list(a))):
        crits = [{"id": i, "type": "rule", "statement": STATEMENTS.get(i, f"{i} holds."), "rule": {"kind": "verifier"},
                  **({"role": "diagnostic"} if i in (diagnostic or {}) else {})} for i in ids]
        (snap / f"{layer}_score.yaml").write_text(yaml.safe_dump({"layer": layer, "criteria": crits}), encoding="utf-8")
    for cid, packet in (packets or {}).items():
        (paths.packets / f"{cid}.json").write_text(json.dumps(packet), encoding="utf-8")
    paths.events.write_text(json.dumps(EVENTS), encoding="utf-8")
    seal(paths.root, cs.identity.run_id)
    return paths


@pytest.fixture(scope="module")
def archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("drill") / "out"
    _cell(out, "E1-a-001", "hA", {"H1": T}, {"A1": T}, diagnostic={"D1": F})
    _cell(out, "E1-b-001", "hA", {"H1": F}, {"A1": U}, reasons={"H1": "no exit status at seq 2, 3 (ledger seq 9)"},
          packets={"A1": {"criterion": "A1", "scanned": 4, "matched": 1, "returned": 1, "truncated": False,
                          "records": [{"ref": "seq:1", "source": "trace", "event_type": "tool", "text": "exit 3"}]}})
    _cell(out, "C1-a-001", "hA", {"H1": T}, {"A1": T})
    for task in ("E1-a-001", "E1-b-001"):
        _cell(out, task, "reference", {"H1": T}, {"A1": T})
    _cell(out, "E1-a-001", "reference+hide_exit_code", {"H1": F}, {"A1": F})
    tampered = _cell(out, "E1-a-001", "hB", {"H1": F}, {"A1": T})
    (tampered.root / "events.json").write_text("[]", encoding="utf-8")  # after the seal
    return out


@pytest.fixture(scope="module")
def written(archive: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("drill-written") / "out"
    shutil.copytree(archive, out)
    write_reports(out)
    return out


def test_calibration_is_apart_from_every_corpus_pool(archive: Path) -> None:
    runs = load_runs(archive)
    s = aggregate(runs)
    assert set(s.by_harness) == {"hA", "hB"}
    assert s.overall.runs == 3 and s.overall.cells.total == 4          # hA's three, hB tampered
    assert s.by_model["m1"].runs == 3 and s.by_component["E"].runs == 2
    assert set(s.by_harness_model) == set(s.by_harness_component) == {"hA", "hB"}
    assert s.calibration is not None and not s.calibration.included_in_pools
    assert set(s.calibration.by_harness) == {"reference", "reference+hide_exit_code"}
    assert s.calibration.by_harness["reference"].harness_macro == pytest.approx(100.0)
    assert s.calibration.overall.runs == 3
    assert heatmap_data(s).harnesses == ["hA", "hB"]
    assert [c.calibration for c in s.cells].count(True) == 3           # every cell is still listed

    pooled = aggregate(runs, include_calibration=True)
    assert pooled.overall.runs == 6 and "reference" in pooled.by_harness
    assert pooled.by_model["m1"].runs == 6
    assert pooled.calibration is not None and pooled.calibration.included_in_pools
    assert "reference" in heatmap_data(pooled).harnesses


def test_terminal_table_keeps_the_instrument_apart_within_80_columns(archive: Path) -> None:
    lines = summary_table(aggregate(load_runs(archive)))
    at = lines.index("calibration instrument (reference and mutants, not in 'all'):")
    assert [ln.split()[0] for ln in lines[3:at]] == ["hA", "hB", "all"]
    assert lines[3 + 2].split()[1] == "3/4"                              # all: hA + hB only
    assert lines[at + 1].split()[:2] == ["reference", "2/2"]
    assert lines[at + 2].split()[:2] == ["+hide_exit_code", "1/1"]
    assert max(map(len, lines)) <= 80
    pooled = summary_table(aggregate(load_runs(archive), include_calibration=True))
    assert not any(ln.startswith("calibration instrument") for ln in pooled)
    assert any(ln.startswith("reference ") for ln in pooled)


def test_failed_diagnostic_criteria_are_shown_as_such(archive: Path, written: Path) -> None:
    s = aggregate(load_runs(archive))
    row = next(c for c in s.cells if c.task_id == "E1-a-001" and c.harness == "hA")
    assert row.failed == [] and row.diagnostic_failed == ["D1"]
    assert row.page == page_path("traces/E1-a-001/m1/hA")
    assert s.by_harness["hA"].diagnostics.failed == 1 and s.overall.diagnostics.runs_with_failed == 1
    html = (written / "reports" / "report.html").read_text(encoding="utf-8")
    assert '<span class="diag">diagnostic: D1</span>' in html
    md = (written / "reports" / "summary.md").read_text(encoding="utf-8")
    assert "| E1-a-001 | m1 | hA | 1 | 100.0 |  | D1 | [criteria](<cells/traces/E1-a-001/m1/hA.html>) |" in md


def test_a_page_for_each_cell_with_a_criterion_not_passed(written: Path) -> None:
    pages = sorted(p.relative_to(written / "reports" / "cells").as_posix()
                   for p in (written / "reports" / "cells").rglob("*.html"))
    assert pages == ["traces/E1-a-001/m1/hA.html", "traces/E1-a-001/m1/reference+hide_exit_code.html",
                     "traces/E1-b-001/m1/hA.html"]                    # not the passing or the tampered cells
    html = (written / "reports" / "report.html").read_text(encoding="utf-8")
    links = {unquote(h) for h in re.findall(r'href="(cells/[^"]+)"', html)}
    assert {f"cells/{p}" for p in pages} == links                      # cells table and drill-down grid
    assert "../traces/E1-a-001/m1/hB/" in html and "cells/traces/E1-a-001/m1/hB" not in html


def test_page_shows_statement_verdict_reason_evidence_and_cited_events(written: Path) -> None:
    page = written / "reports" / "cells" / "traces" / "E1-b-001" / "m1" / "hA.html"
    html = page.read_text(encoding="utf-8")
    assert "<script" not in html.lower() and not re.search(r'(src|href)="(https?:)?//', html)
    assert "The exit status reaches the model." in html and "The report names the failure." in html
    assert "no exit status at seq 2, 3 (ledger seq 9)" in html
    assert 'class="verdict v-fail">FAIL' in html and 'class="verdict v-unscored">UNSCORED' in html
    assert "exit 3" in html                                            # the packet's excerpt
    for seq in (1, 2, 3):                                              # reason and packet citations
        assert f'href="#seq-{seq}"' in html and f'id="seq-{seq}"' in html
    assert 'id="seq-9"' not in html and 'id="seq-4"' not in html      # a ledger seq is no event
    assert "secretish" not in html                                     # raw_event left out
    for href in re.findall(r'href="(\.\./[^"#]+)"', html):
        assert (page.parent / unquote(href)).exists(), href            # every archive link resolves
    assert any(unquote(h).endswith("evidence/packets/A1.json") for h in re.findall(r'href="([^"]+)"', html))


def test_diagnostic_page_marks_the_role(written: Path) -> None:
    html = (written / "reports" / "cells" / "traces" / "E1-a-001" / "m1" / "hA.html").read_text(encoding="utf-8")
    assert "[harness] D1" in html and "diagnostic (not in the score)" in html
    assert "A diagnostic observation." in html
    assert "Criteria (1 of 3 not passed)" in html


def test_packet_outside_the_cell_is_not_followed(tmp_path: Path) -> None:
    paths = _cell(tmp_path, "E1-c-001", "hA", {"H1": F}, {"A1": T})
    (tmp_path / "secret.json").write_text('{"records": ["LEAKED"]}', encoding="utf-8")
    cs = CombinedScore.model_validate_json(paths.combined_score.read_bytes())
    cs.verdicts[0].packet_path = "../../../../secret.json"
    paths.combined_score.write_text(cs.model_dump_json(by_alias=True), encoding="utf-8")
    seal(paths.root)
    (record,) = load_runs(tmp_path)
    detail = load_cell_detail(tmp_path, record)
    assert detail is not None
    crit = detail.criteria[0]
    assert crit.packet is None and "escapes the run directory" in crit.excerpt and "LEAKED" not in crit.excerpt


def test_stale_pages_go_when_a_cell_passes_again(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _cell(out, "E1-a-001", "hA", {"H1": F}, {"A1": T})
    assert len(write_reports(out).pages) == 1
    shutil.rmtree(out / "traces")
    _cell(out, "E1-a-001", "hA", {"H1": T}, {"A1": T})
    assert write_reports(out).pages == []
    assert not list((out / "reports" / "cells").rglob("*.html"))


def test_cited_seqs() -> None:
    assert cited_seqs("3 tool(s) at seq 3, 5, 7; also seq:12 and seq #4") == [3, 5, 7, 12, 4]
    assert cited_seqs("tool call(s) at ledger seq 4") == []
    assert cited_seqs("no citation") == []


def test_version_columns_when_a_named_version_ran(tmp_path: Path) -> None:
    _cell(tmp_path, "E1-a-001", "hA", {"H1": T}, {"A1": T}, version="1.0")
    _cell(tmp_path, "E1-a-001", "hA@2.0", {"H1": F}, {"A1": T}, version="2.0")
    s = aggregate(load_runs(tmp_path))
    t = per_harness(s)
    assert t.headers[:2] == ["Harness", "Version"]
    assert [r[:2] for r in t.rows] == [["hA", "1.0"], ["hA@2.0", "2.0"], ["All", ""]]
    assert "versions: hA 1.0; hA@2.0 2.0" in summary_table(s)
    plain = aggregate([r for r in load_runs(tmp_path) if "@" not in r.harness])
    assert per_harness(plain).headers[1] == "Runs"                     # no named version: no column


def test_cli_report_include_calibration(archive: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out = tmp_path / "out"
    shutil.copytree(archive, out)
    assert main(["report", str(out), "--include-calibration"]) == 0
    assert "criteria page(s)" in capsys.readouterr().out
    summary = json.loads((out / "reports" / "summary.json").read_text(encoding="utf-8"))
    assert summary["schema"] == "tt-report/2" and summary["calibration"]["included_in_pools"] is True
    assert summary["overall"]["runs"] == 6
