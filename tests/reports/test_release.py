"""The release manifest (``tracetrial release``; issue 24 item 7): a synthetic archive of real
task snapshots, every field of the manifest, the protocol-stage logic, and ``--verify`` passing
on an untouched archive and failing on one changed byte in any listed file, a deleted file, an
added file and a forged ``combined_score.json``.

The archive (``corpus``), all probe-protocol cells sealed as scoring leaves them:

    E1-build-status-001     hA, hB measured and attributable; reference + every applicable mutant
                            flipping what task.yaml declares               -> stage attributable
    V1-migration-crash-001  hA measured, hB unsupported; calibrated         -> stage audited
    T3-invoice-args-001     hA, hB measured; no calibration run             -> stage authored
    G1-bare-snapshot-001    a snapshot that is not a loadable pack          -> not authored
"""

from __future__ import annotations

import hashlib
import json
import re
import shutil
from pathlib import Path
from typing import Any

import pytest

from harnesses.reference.mutants import MUTANTS, not_applicable
from reports.release import (
    DEFAULT_RELEASE,
    STAGES,
    ReleaseError,
    ReleaseManifest,
    base_harness,
    build_release,
    verify_release,
    write_release,
)
from reports.synthetic import make_combined, seal, write_cell
from tests.criteria.archive_factory import forge_clean_score
from tracetrial.archive import RunPaths, sha256_file
from tracetrial.results import CombinedScore, ExceptionInfo, ResultRecord
from tracetrial.task import TaskPack, load_task, pack_digest
from tracetrial_cli.main import main

T, F, U = True, False, None
REPO_TASKS = Path(__file__).resolve().parents[2] / "tasks"
E1, V1, T3, BARE = "E1-build-status-001", "V1-migration-crash-001", "T3-invoice-args-001", "G1-bare-snapshot-001"
CONFIG = {"sandbox": "docker", "permission_mode": "bypass", "seed": "0123abcd", "budgets": {"max_tool_calls": 8}}


def pack(task_id: str) -> TaskPack:
    return load_task(REPO_TASKS / task_id)


def ids(p: TaskPack) -> tuple[list[str], list[str]]:
    return [c.id for c in p.harness_rubric.criteria], [c.id for c in p.agent_rubric.criteria]


def cell(out: Path, task_id: str, model: str, harness: str, fail: set[str] | None = None, *,
         snapshot: bool = True, unscored: set[str] | None = None, links: list[tuple[str, str]] | None = None,
         harness_version: str | None = None, **kw: Any) -> RunPaths:
    """One sealed cell of ``task_id`` with the repo pack's criteria (``fail`` fail, ``unscored``
    unscored, the rest pass) and the pack as its snapshot; ``kw`` go to :func:`write_cell`."""
    fail, unscored = fail or set(), unscored or set()
    if snapshot:
        h_ids, a_ids = ids(pack(task_id))
    else:
        h_ids, a_ids = ["H1"], ["A1"]

    def outcome(c: str) -> bool | None:
        return None if c in unscored else c not in fail

    cs = make_combined(task_id, model, harness, {c: outcome(c) for c in h_ids}, {c: outcome(c) for c in a_ids},
                       links=links or [], admitted=kw.pop("admitted", True))
    cs.identity.harness_version = harness_version
    paths = write_cell(out, None if kw.pop("no_score", False) else cs, task_id=task_id, model=model,
                       harness=harness, **kw)
    snap = paths.private / "task" / task_id
    if snapshot:
        shutil.copytree(REPO_TASKS / task_id, snap, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"),
                        dirs_exist_ok=True)
    result = ResultRecord.model_validate_json(paths.result.read_bytes())
    result.identity = cs.identity
    result.resolved_config = {**CONFIG, "pack_digest": pack_digest(snap)}
    paths.result.write_text(result.model_dump_json(by_alias=True), encoding="utf-8")
    seal(paths.root, cs.identity.run_id)
    return paths


def calibration(out: Path, task_id: str) -> int:
    """The reference cell (all pass) and every mutant the pack does not prune, flipping exactly what
    its task.yaml declares (agent flips linked to a flipped harness criterion); returns the count."""
    p = pack(task_id)
    cell(out, task_id, "probe", "reference")
    n = 1
    declared = p.spec.calibration.mutants
    for mutant in sorted(MUTANTS):
        if not_applicable(mutant, p) is not None and mutant not in declared:
            continue
        flips = set(declared.get(mutant, []))
        h = sorted(c for c in flips if c.startswith("H"))
        links = [(h[0], a) for a in sorted(flips) if a.startswith("A")] if h else []
        cell(out, task_id, "probe", f"reference+{mutant}", flips, links=links)
        n += 1
    return n


@pytest.fixture
def corpus(tmp_path: Path) -> Path:
    out = tmp_path / "out"
    cell(out, E1, "m1", "hA", harness_version="2.0.1")
    cell(out, E1, "m1", "hB", {"H1-exit-status-visible", "A1-status-reports-failure"},
         links=[("H1-exit-status-visible", "A1-status-reports-failure")])
    calibration(out, E1)
    cell(out, V1, "m1", "hA")
    cell(out, V1, "m1", "hB", no_score=True, status="skipped", eligibility="unsupported",
         eligibility_reason="harness has no MCP channel")
    calibration(out, V1)
    cell(out, T3, "m1", "hA")
    cell(out, T3, "m1", "hB")
    cell(out, BARE, "m1", "hA", snapshot=False)
    cell(out, BARE, "m1", "hB", snapshot=False)
    return out


def stages(entry: Any) -> dict[str, tuple[bool, str]]:
    return {s.stage: (s.reached, s.reason) for s in entry.stages}


def run(m: ReleaseManifest, path: str) -> Any:
    return next(r for r in m.runs if r.path == path)


def task(m: ReleaseManifest, task_id: str) -> Any:
    return next(t for t in m.tasks if t.task_id == task_id)


def cli(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["release", *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# ------------------------------------------------------------------------------ the manifest


def test_every_field_of_an_evaluated_run(corpus: Path) -> None:
    m = build_release(corpus, generated_at="2026-12-02T00:00:00+00:00")
    rel = f"traces/{E1}/m1/hA"
    r = run(m, rel)
    root = corpus / rel
    digest = pack_digest(REPO_TASKS / E1)
    cs = CombinedScore.model_validate_json((root / "artifacts/llm_judge/combined_score.json").read_bytes())
    assert (r.archive, r.path, r.role) == ("main", rel, "evaluated")
    assert (r.run_id, r.task_id, r.task_revision) == (f"{E1}.m1.hA", E1, 1)
    assert r.pack_digest == r.snapshot_digest == digest  # the snapshot is the pack that ran
    assert (r.model, r.harness, r.harness_version, r.protocol) == ("m1", "hA", "2.0.1", "probe")
    assert (r.seal, r.run_status, r.eligibility, r.eligibility_reason) == ("sealed", "completed", "eligible", None)
    assert (r.report_status, r.report_reason) == ("measured", None)
    assert r.resolved_config == {**CONFIG, "pack_digest": digest}
    canonical = json.dumps(r.resolved_config, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    assert r.resolved_config_sha256 == hashlib.sha256(canonical.encode()).hexdigest()
    assert r.score is not None and r.score.model_dump() == {
        "S_H": 50.0, "S_A": 50.0, "S": 100.0, "effective_score": 100.0, "p_H": cs.harness.n, "n_H": cs.harness.n,
        "unscored_H": 0, "p_A": cs.agent.n, "n_A": cs.agent.n, "unscored_A": 0, "admitted": True,
        "agent_success": True, "combined_pass": True, "clean": True, "label": "clean", "label_rule": 7,
        "judge": None}
    assert [(s.stage, s.reached) for s in r.stages] == [(s, True) for s in STAGES[3:]]
    assert r.artifacts == {k: f"{rel}/{v}" for k, v in {
        "result": "result.json", "events": "events.json", "summary": "summary.json", "manifest": "manifest.json",
        "combined_score": "artifacts/llm_judge/combined_score.json",
        "snapshot": f"private/task/{E1}/task.yaml"}.items()}
    on_disk = sorted(p for p in root.rglob("*") if p.is_file())
    assert [f.path for f in r.files] == sorted(f"{rel}/{p.relative_to(root).as_posix()}" for p in on_disk)
    for f in r.files:
        p = corpus / f.path
        assert (f.size, f.sha256) == (p.stat().st_size, sha256_file(p))
    assert f"{rel}/manifest.json" in {f.path for f in r.files}


def test_top_level_fields_tasks_and_counts(corpus: Path) -> None:
    m = build_release(corpus, generated_at="2026-12-02T00:00:00+00:00")
    dumped = json.loads(m.model_dump_json(by_alias=True))
    assert dumped["schema"] == "tt-release/1"
    assert (m.generated_at, m.tracetrial_version, m.archives) == ("2026-12-02T00:00:00+00:00", "0.1.0", {"main": "."})
    assert m.selection.model_dump() == {"tasks": None, "harnesses": None, "models": None}
    n_cal = sum(1 for r in m.runs if r.role == "calibration")
    assert n_cal == sum(1 for r in m.runs if base_harness(r.harness) == "reference") > 20
    assert m.counts == {
        "runs": 8 + n_cal, "evaluated": 8, "calibration": n_cal, "files": sum(len(r.files) for r in m.runs),
        "tasks": 4, "tasks_authored": 1, "tasks_audited": 1, "tasks_cross_harness_eligible": 0,
        "tasks_executed": 0, "tasks_apparatus_valid": 0, "tasks_measured": 0, "tasks_attributable": 1,
        "tasks_not_authored": 1}
    assert [r.path for r in m.runs] == sorted(r.path for r in m.runs)
    e1 = task(m, E1)
    assert (e1.revision, e1.pack_digest, e1.component, e1.property) == (
        1, pack_digest(REPO_TASKS / E1), "E", pack(E1).spec.property)
    assert e1.runs == [f"traces/{E1}/m1/hA", f"traces/{E1}/m1/hB"]
    assert e1.calibration_runs == sorted(r.path for r in m.runs if r.task_id == E1 and r.role == "calibration")
    assert f"traces/{E1}/probe/reference" in e1.calibration_runs


def test_protocol_stage_of_each_task(corpus: Path) -> None:
    m = build_release(corpus)
    assert {t.task_id: t.stage for t in m.tasks} == {E1: "attributable", V1: "audited", T3: "authored", BARE: None}
    e1 = stages(task(m, E1))
    assert e1["audited"][0] and "reference 100/100" in e1["audited"][1]
    assert e1["cross_harness_eligible"] == (True, "eligible on 2 harness(es): hA, hB")
    v1 = stages(task(m, V1))
    assert v1["audited"][0]
    assert v1["cross_harness_eligible"] == (False, "eligible on 1 harness(es): hA; hB: unsupported")
    # the later stages are still reported on their own (hA's run is attributable)
    assert v1["attributable"] == (True, "1 eligible run(s)")
    t3 = stages(task(m, T3))
    assert t3["authored"][0] and t3["cross_harness_eligible"][0] and t3["attributable"][0]
    assert t3["audited"] == (False, "no calibration run (reference, reference+<defect>) of the task")
    bare = stages(task(m, BARE))
    assert not bare["authored"][0] and "the task snapshot does not load" in bare["authored"][1]


def test_cell_stages_executed_apparatus_measured_attributable(tmp_path: Path) -> None:
    out = tmp_path / "out"
    h_ids, a_ids = ids(pack(T3))
    cell(out, T3, "m1", "ok")
    cell(out, T3, "m1", "crashed", no_score=True, status="apparatus_error",
         exception=ExceptionInfo(type="GatewayStartError", message="no answer", origin="apparatus"))
    cell(out, T3, "m1", "invalid", set(h_ids), admitted=False)
    cell(out, T3, "m1", "nojudge", unscored={a_ids[0]})
    na = cell(out, T3, "m1", "notapplicable", unscored={h_ids[0]})
    data = json.loads(na.combined_score.read_text(encoding="utf-8"))
    next(v for v in data["verdicts"] if v["id"] == h_ids[0])["reason"] = "not applicable: no such record"
    na.combined_score.write_text(json.dumps(data), encoding="utf-8")
    seal(na.root)
    relabel = cell(out, T3, "m1", "relabelled", {a_ids[0]})
    data = json.loads(relabel.combined_score.read_text(encoding="utf-8"))
    data["attribution"].update(label="harness_absorbed", label_rule=3)
    relabel.combined_score.write_text(json.dumps(data), encoding="utf-8")
    seal(relabel.root)
    odd = cell(out, T3, "m1", "inconsistent")
    data = json.loads(odd.combined_score.read_text(encoding="utf-8"))
    data["S"] = 90.0
    odd.combined_score.write_text(json.dumps(data), encoding="utf-8")
    seal(odd.root)
    m = build_release(out)

    def reached(h: str) -> list[str]:
        return [s.stage for s in run(m, f"traces/{T3}/m1/{h}").stages if s.reached]

    assert reached("ok") == ["executed", "apparatus_valid", "measured", "attributable"]
    assert reached("crashed") == []
    assert stages(run(m, f"traces/{T3}/m1/crashed"))["executed"] == (
        False, "the harness did not run (status apparatus_error)")
    assert stages(run(m, f"traces/{T3}/m1/crashed"))["measured"][1] == "apparatus_valid not reached"
    assert reached("invalid") == ["executed"]
    assert stages(run(m, f"traces/{T3}/m1/invalid"))["apparatus_valid"][1].startswith("apparatus_invalid: not admitted")
    assert reached("nojudge") == ["executed", "apparatus_valid", "measured"]
    assert stages(run(m, f"traces/{T3}/m1/nojudge"))["attributable"][1] == (
        f"core criteria without a final verdict (unscored): {a_ids[0]}")
    assert reached("notapplicable") == ["executed", "apparatus_valid", "measured", "attributable"]
    assert reached("relabelled") == ["executed", "apparatus_valid", "measured"]
    assert "stored label 'harness_absorbed' (rule 3) but the sets give 'agent_caused'" in stages(
        run(m, f"traces/{T3}/m1/relabelled"))["attributable"][1]
    assert reached("inconsistent") == ["executed", "apparatus_valid"]
    assert "S 90.0 != S_H + S_A" in stages(run(m, f"traces/{T3}/m1/inconsistent"))["measured"][1]
    # the task: eligible everywhere, but one eligible run did not execute
    t = task(m, T3)
    assert t.stage == "authored"  # no calibration
    s = stages(t)
    assert s["cross_harness_eligible"][0] and not s["executed"][0]
    assert s["executed"][1].startswith(f"1 of 7 eligible run(s) not executed: traces/{T3}/m1/crashed")
    assert s["measured"][1].startswith("3 of 7 eligible run(s) not measured")


def test_task_stage_stops_at_the_first_stage_not_reached(tmp_path: Path) -> None:
    out = tmp_path / "out"
    calibration(out, E1)
    cell(out, E1, "m1", "hA")
    cell(out, E1, "m1", "hB", no_score=True, status="failed")  # ran, but never scored
    t = task(build_release(out), E1)
    assert t.stage == "executed"
    assert stages(t)["apparatus_valid"][1].startswith("1 of 2 eligible run(s) not apparatus_valid")


@pytest.mark.parametrize("defect", ["reference_fails", "extra_flip", "missing_mutant", "other_pack"])
def test_audited_needs_a_calibration_that_verifies(tmp_path: Path, defect: str) -> None:
    out = tmp_path / "out"
    calibration(out, E1)
    cell(out, E1, "m1", "hA")
    cell(out, E1, "m1", "hB")
    h_ids, _ = ids(pack(E1))
    # a mutant E1 does not prune and declares nothing for: it must flip nothing
    quiet = next(m for m in sorted(MUTANTS) if not_applicable(m, pack(E1)) is None
                 and m not in pack(E1).spec.calibration.mutants)
    if defect == "reference_fails":
        cell(out, E1, "probe", "reference", {h_ids[0]})
    elif defect == "extra_flip":
        cell(out, E1, "probe", f"reference+{quiet}", {h_ids[1]})
    elif defect == "missing_mutant":
        shutil.rmtree(out / "traces" / E1 / "probe" / "reference+hide_exit_code")
    else:
        mutant = RunPaths(out / "traces" / E1 / "probe" / f"reference+{quiet}")
        result = ResultRecord.model_validate_json(mutant.result.read_bytes())
        result.resolved_config["pack_digest"] = "0" * 64
        mutant.result.write_text(result.model_dump_json(by_alias=True), encoding="utf-8")
        seal(mutant.root)
    t = task(build_release(out), E1)
    reached, reason = stages(t)["audited"]
    # two pack digests among the task's runs: not even authored
    assert not reached and t.stage == (None if defect == "other_pack" else "authored")
    expected = {"reference_fails": "reference: unexpected", "extra_flip": f"reference+{quiet}: unexpected",
                "missing_mutant": "reference+hide_exit_code: not_run",
                "other_pack": "calibration ran another pack digest"}[defect]
    assert expected in reason


# ------------------------------------------------------------------------------ CLI and verify


def test_cli_writes_the_default_file_and_verifies_an_untouched_archive(corpus: Path,
                                                                      capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = cli(capsys, str(corpus))
    target = corpus / DEFAULT_RELEASE
    assert code == 0 and err == "" and target.is_file()
    digest = hashlib.sha256(target.read_bytes()).hexdigest()
    assert out.startswith(f"wrote {target}: 8 evaluated + ") and out.rstrip().endswith(f"sha256 {digest}")
    assert "1 attributable, 1 audited, 1 authored" in out
    m = ReleaseManifest.model_validate_json(target.read_bytes())
    code, out, err = cli(capsys, "--verify", str(corpus))
    assert (code, err) == (0, "")
    assert out.strip() == (f"verified {target}: {len(m.runs)} run(s), {m.counts['files']} file(s) unchanged "
                           f"(sha256 {digest})")
    assert not any((corpus / "traces").rglob("release*"))  # never inside a cell


def test_one_changed_byte_in_any_listed_file_fails_verify(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # a small archive (every file of it is tried): two evaluated runs and two calibration runs
    out = tmp_path / "out"
    cell(out, T3, "m1", "hA")
    cell(out, T3, "m1", "hB", {ids(pack(T3))[0][0]})
    cell(out, T3, "probe", "reference")
    cell(out, T3, "probe", "reference+hide_exit_code")
    assert cli(capsys, str(out))[0] == 0
    m = ReleaseManifest.model_validate_json((out / DEFAULT_RELEASE).read_bytes())
    listed = [(r, f) for r in m.runs for f in r.files]
    assert len(listed) == m.counts["files"] > 40 and {r.role for r, _ in listed} == {"evaluated", "calibration"}
    for r, f in listed:
        p = out / f.path
        original = p.read_bytes()
        # one byte changed (an empty file gains one)
        p.write_bytes(bytes([original[0] ^ 0x01]) + original[1:] if original else b"\0")
        check = verify_release(out / DEFAULT_RELEASE, out)
        assert not check.ok
        changed = f"{f.path}: content changed since the release (sha256 mismatch)"
        assert changed in [str(x) for x in check.problems], f.path
        assert any(x.path == r.path and "tampered" in x.issue for x in check.problems), f.path
        p.write_bytes(original)
    # exit code and message, through the command, for two kinds of file
    for rel in (f"traces/{T3}/m1/hB/events.json", f"traces/{T3}/probe/reference/private/task/{T3}/truth.json"):
        p = out / rel
        original = p.read_bytes()
        p.write_bytes(bytes([original[0] ^ 0x01]) + original[1:])
        code, _, err = cli(capsys, "--verify", str(out))
        assert code == 1
        assert f"error: {rel}: content changed since the release (sha256 mismatch)" in err.splitlines()
        assert "problem(s); the archive no longer matches the release" in err
        p.write_bytes(original)
    assert cli(capsys, "--verify", str(out))[0] == 0


def test_a_deleted_file_fails_verify(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(capsys, str(corpus))[0] == 0
    rel = f"traces/{T3}/m1/hA/evidence/workspace.diff"
    (corpus / rel).unlink()
    code, _, err = cli(capsys, "--verify", str(corpus))
    assert code == 1
    lines = err.splitlines()
    assert f"error: {rel}: listed in the release but missing" in lines
    assert (f"error: traces/{T3}/m1/hA: cell incomplete (released sealed): evidence/workspace.diff: "
            "listed in the manifest but missing") in lines


def test_an_added_file_in_a_released_cell_fails_verify(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(capsys, str(corpus))[0] == 0
    (corpus / "traces" / T3 / "m1" / "hA" / "evidence" / "extra.txt").write_text("x", encoding="utf-8")
    code, _, err = cli(capsys, "--verify", str(corpus))
    assert code == 1
    assert (f"error: traces/{T3}/m1/hA: cell tampered (released sealed): evidence/extra.txt: "
            "not covered by the manifest") in err.splitlines()


@pytest.mark.parametrize("forger", ["score_only", "and_reseals_the_cell", "and_rehashes_the_release"])
def test_a_forged_combined_score_fails_verify(corpus: Path, capsys: pytest.CaptureFixture[str], forger: str) -> None:
    assert cli(capsys, str(corpus))[0] == 0
    cell_rel = f"traces/{E1}/m1/hB"
    root = corpus / cell_rel
    forge_clean_score(root)
    if forger != "score_only":
        seal(root)  # the per-cell seal now agrees with the forgery
    if forger == "and_rehashes_the_release":
        # ... and so do the release's checksums: only the re-derived numbers give it away
        path = corpus / DEFAULT_RELEASE
        data = json.loads(path.read_text(encoding="utf-8"))
        entry = next(r for r in data["runs"] if r["path"] == cell_rel)
        for f in entry["files"]:
            p = corpus / f["path"]
            f.update(size=p.stat().st_size, sha256=sha256_file(p))
        path.write_text(json.dumps(data), encoding="utf-8")
    code, _, err = cli(capsys, "--verify", str(corpus))
    assert code == 1
    lines = err.splitlines()
    score = f"{cell_rel}/artifacts/llm_judge/combined_score.json"
    if forger == "score_only":
        assert f"error: {score}: content changed since the release (sha256 mismatch)" in lines
        assert (f"error: {cell_rel}: cell tampered (released sealed): artifacts/llm_judge/combined_score.json: "
                "content changed since the manifest was written (sha256 mismatch)") in lines
    elif forger == "and_reseals_the_cell":
        assert f"error: {score}: content changed since the release (sha256 mismatch)" in lines
        assert f"error: {cell_rel}/manifest.json: content changed since the release (sha256 mismatch)" in lines
        assert not any("tampered" in line for line in lines)  # the cell's own seal holds
    else:
        assert any(line.startswith(f"error: {cell_rel}: the release manifest differs from what the archive gives (")
                   and re.search(r"score\.S: manifest (\d+(\.\d+)?), archive 100\.0", line) is not None
                   and "manifest 100.0" not in line for line in lines), lines
        # the task's stage does not depend on the score's value: only the run is named
        assert not any(line.startswith(f"error: task {E1}") for line in lines)


def test_a_hand_edited_release_manifest_fails_verify(corpus: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert cli(capsys, str(corpus))[0] == 0
    path = corpus / DEFAULT_RELEASE
    data = json.loads(path.read_text(encoding="utf-8"))
    next(t for t in data["tasks"] if t["task_id"] == T3)["stage"] = "attributable"
    path.write_text(json.dumps(data), encoding="utf-8")
    code, _, err = cli(capsys, "--verify", str(corpus))
    assert code == 1
    assert (f"error: task {T3}: the release manifest differs from what the archive gives "
            '(stage: manifest "attributable", archive "authored")') in err.splitlines()


def test_verify_without_a_manifest_or_archive(tmp_path: Path, corpus: Path,
                                              capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, "--verify", str(corpus))
    assert code == 2 and "no release manifest (run: tracetrial release OUTPUT)" in err
    (corpus / "release").mkdir()
    (corpus / DEFAULT_RELEASE).write_text("{", encoding="utf-8")
    code, _, err = cli(capsys, "--verify", str(corpus))
    assert code == 2 and "unreadable release manifest" in err
    code, _, err = cli(capsys, str(tmp_path / "nothing"))
    assert code == 2 and "has no traces/ folder" in err


def test_build_refuses_a_tampered_cell_and_a_target_inside_the_cells(corpus: Path,
                                                                    capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = cli(capsys, str(corpus), "--out", str(corpus / "traces" / E1 / "m1" / "hA" / "release.json"))
    assert code == 1 and "a release manifest is never written into the archive's cells" in err
    assert not (corpus / "traces" / E1 / "m1" / "hA" / "release.json").exists()
    forge_clean_score(corpus / "traces" / T3 / "m1" / "hB")
    code, _, err = cli(capsys, str(corpus))
    assert code == 1
    assert (f"traces/{T3}/m1/hB: tampered: artifacts/llm_judge/combined_score.json: content changed since the "
            "manifest was written") in err
    assert not (corpus / DEFAULT_RELEASE).exists()
    # the rest can still be released, leaving the tampered cell out
    with pytest.raises(ReleaseError, match="tampered"):
        build_release(corpus, tasks=[T3])
    assert build_release(corpus, tasks=[E1, V1]).counts["evaluated"] == 4


def test_selection_and_a_separate_calibration_archive(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    out, cal = tmp_path / "out", tmp_path / "calibration"
    cell(out, E1, "m1", "hA")
    cell(out, E1, "m1", "hB")
    cell(out, E1, "m2", "hA")
    cell(out, T3, "m1", "hA")
    n_cal = calibration(cal, E1) + calibration(cal, V1)  # V1 is not selected: its calibration stays out
    target = tmp_path / "lean.manifest"
    code, _, err = cli(capsys, str(out), "--calibration", str(cal), "--out", str(target), "--harnesses", "hA",
                       "--models", "m1")
    assert (code, err) == (0, "")
    m = ReleaseManifest.model_validate_json(target.read_bytes())
    assert m.archives == {"main": ".", "calibration": "../calibration"}
    assert m.selection.model_dump() == {"tasks": None, "harnesses": ["hA"], "models": ["m1"]}
    assert [r.path for r in m.runs if r.role == "evaluated"] == [f"traces/{E1}/m1/hA", f"traces/{T3}/m1/hA"]
    cal_runs = [r for r in m.runs if r.role == "calibration"]
    assert {r.archive for r in cal_runs} == {"calibration"} and {r.task_id for r in cal_runs} == {E1}
    assert 0 < len(cal_runs) < n_cal
    e1 = stages(task(m, E1))
    assert e1["audited"][0] and e1["cross_harness_eligible"] == (False, "eligible on 1 harness(es): hA")
    assert cli(capsys, "--verify", str(out), "--out", str(target))[0] == 0
    # a changed file of the calibration archive is named with its path there
    p = cal / "traces" / E1 / "probe" / "reference" / "events.json"
    p.write_bytes(p.read_bytes().replace(b"run_id", b"Run_id", 1))
    code, _, err = cli(capsys, "--verify", str(out), "--out", str(target))
    assert code == 1 and f"error: {p.as_posix()}: content changed since the release (sha256 mismatch)" in err


def test_release_writer_returns_the_sha256_of_the_bytes_written(corpus: Path, tmp_path: Path) -> None:
    m = build_release(corpus, tasks=[T3])
    target = tmp_path / "r" / "manifest.json"
    digest = write_release(m, target, corpus)
    assert digest == hashlib.sha256(target.read_bytes()).hexdigest()
    assert verify_release(target, corpus).ok


def test_repetitions_are_released_and_verified(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    # --tt-repeat 2: repetition 2 of each cell under repeats/rep-2/traces/; the release pins both
    from tracetrial.archive import repetition_root

    out = tmp_path / "out"
    for rep in (1, 2):
        cell(repetition_root(out, rep), T3, "m1", "hA")
        cell(repetition_root(out, rep), T3, "m1", "hB")
    assert cli(capsys, str(out))[0] == 0
    m = ReleaseManifest.model_validate_json((out / DEFAULT_RELEASE).read_bytes())
    assert sorted((r.path, r.repetition) for r in m.runs) == [
        (f"repeats/rep-2/traces/{T3}/m1/hA", 2), (f"repeats/rep-2/traces/{T3}/m1/hB", 2),
        (f"traces/{T3}/m1/hA", 1), (f"traces/{T3}/m1/hB", 1)]
    assert m.tasks[0].runs == sorted(r.path for r in m.runs)
    assert verify_release(out / DEFAULT_RELEASE, out).ok
    code, _, err = cli(capsys, str(out), "--out", str(out / "repeats" / "rep-2" / "release.json"))
    assert code == 1 and "is inside" in err and "repeats/" in err
    changed = out / "repeats" / "rep-2" / "traces" / T3 / "m1" / "hB" / "events.json"
    changed.write_text("[]", encoding="utf-8")
    check = verify_release(out / DEFAULT_RELEASE, out)
    assert not check.ok and any("rep-2" in p.path and "sha256 mismatch" in p.issue for p in check.problems)
