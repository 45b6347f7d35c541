"""Run archive: manifest tamper detection, redaction, path-escape rejection."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from tracetrial.archive import RunArchive, RunPaths, resolve_inside, verify_manifest
from tracetrial.errors import PathEscapeError
from tracetrial.redact import REDACTED, Redactor

SECRET = "sk-ant-api03-PLANTEDsecretVALUE0123456789abcdef"
PLANTED = "tt-planted-credential-7f3a9c"


def make_archive(tmp_path: Path) -> RunArchive:
    paths = RunPaths.for_cell(tmp_path / "out", "E1-build-status-001", "probe", "reference+hide_exit_code")
    paths.make()
    redactor = Redactor.from_environment(extra=[PLANTED], env={"ANTHROPIC_API_KEY": SECRET})
    return RunArchive(paths, redactor)


def test_layout(tmp_path: Path) -> None:
    archive = make_archive(tmp_path)
    root = archive.paths.root
    assert root.relative_to(tmp_path / "out").parts == ("traces", "E1-build-status-001", "probe",
                                                        "reference+hide_exit_code")
    assert archive.paths.combined_score.relative_to(root).as_posix() == "artifacts/llm_judge/combined_score.json"


def test_manifest_detects_tampering(tmp_path: Path) -> None:
    archive = make_archive(tmp_path)
    archive.write_json("result.json", {"status": "completed"})
    archive.write_text("native/turn-1.stdout", "hello\n")
    archive.seal("run-1")
    root = archive.paths.root
    assert verify_manifest(root).ok

    (root / "native" / "turn-1.stdout").write_text("hellO\n")
    check = verify_manifest(root)
    assert not check.ok and "native/turn-1.stdout: content changed" in check.problems[0]

    (root / "native" / "turn-1.stdout").unlink()
    assert "listed in the manifest but missing" in verify_manifest(root).problems[0]

    (root / "native" / "extra.txt").write_text("x")
    assert any("extra.txt: not covered" in p for p in verify_manifest(root).problems)

    (root / "manifest.json").unlink()
    assert "manifest missing" in verify_manifest(root).problems[0]


def test_planted_secrets_never_survive(tmp_path: Path) -> None:
    archive = make_archive(tmp_path)
    archive.write_json("result.json", {"env": {"ANTHROPIC_API_KEY": SECRET}, "nested": [{"t": f"key={SECRET}"}],
                                       f"key-{PLANTED}": 1, "headers": {"Authorization": "Bearer abc"}})
    archive.write_text("native/turn-1.stdout", f"echo {PLANTED}\n")
    # A native file copied in as-is (a harness transcript) is redacted at seal time.
    src = tmp_path / "transcript.jsonl"
    src.write_text(f'{{"text": "{SECRET}"}}\n{{"other": "ghp_{"a" * 36}"}}\n')
    archive.copy_in(src, "native/session/transcript.jsonl")
    archive.seal("run-1")
    for dirpath, _dirs, files in os.walk(archive.paths.root):
        for name in files:
            data = (Path(dirpath) / name).read_bytes()
            assert SECRET.encode() not in data, name
            assert PLANTED.encode() not in data, name
            assert b"ghp_aaaa" not in data, name
    text = (archive.paths.root / "result.json").read_text()
    assert REDACTED in text and '"Authorization": "[REDACTED]"' in text
    assert verify_manifest(archive.paths.root).ok


def test_path_escapes_are_rejected(tmp_path: Path) -> None:
    archive = make_archive(tmp_path)
    root = archive.paths.root
    archive.write_text("evidence/ok.txt", "fine")
    outside = tmp_path / "outside.txt"
    outside.write_text("secret")
    os.symlink(outside, root / "evidence" / "link.txt")
    os.symlink(tmp_path, root / "evidence" / "dirlink")
    assert resolve_inside(root, "evidence/ok.txt") == (root / "evidence" / "ok.txt").resolve()
    with pytest.raises(PathEscapeError, match="escapes the run directory"):
        resolve_inside(root, "../../../../../outside.txt")
    with pytest.raises(PathEscapeError, match="is absolute"):
        resolve_inside(root, str(outside))
    with pytest.raises(PathEscapeError, match="through a symlink"):
        resolve_inside(root, "evidence/link.txt")
    with pytest.raises(PathEscapeError, match="through a symlink"):
        resolve_inside(root, "evidence/dirlink/outside.txt")
    with pytest.raises(PathEscapeError, match="not a regular file"):
        resolve_inside(root, "evidence")


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("auth TT_DEPLOY_TOKEN=ttk_live_eCvzsxIu4BuyXGw9UoRGmInc ok", "auth TT_DEPLOY_TOKEN=[REDACTED] ok"),
        ("key ttk_live_eCvzsxIu4BuyXGw9UoRGmInc", "key [REDACTED]"),
        ("API_KEY: zzzzzzzzzzzz", "API_KEY: [REDACTED]"),
        ("stamp token: ST-72079de735", "stamp token: ST-72079de735"),  # prose, not a credential
        ("max_tokens=4096 input_tokens: 123456789", "max_tokens=4096 input_tokens: 123456789"),
        ("key sk-ant-api03-AbCdEfGhIjKlMnOpQrSt", "key [REDACTED]"),
        ("key=sk-proj-AbCdEfGhIjKlMnOpQrSt", "key=[REDACTED]"),
        ('"sk-0123456789abcdef0123"', '"[REDACTED]"'),
        # words ending in "sk" followed by a long slug are not keys
        ("casedesk-replacement-parcels-queue", "casedesk-replacement-parcels-queue"),
        ("task-export-nightly-rollup-2026", "task-export-nightly-rollup-2026"),
        ("risk-register_quarterly_review", "risk-register_quarterly_review"),
    ],
)
def test_redactor_recognises_credentials_by_shape(text: str, expected: str) -> None:
    assert Redactor().text(text) == expected


def _two_pass_seal(archive: RunArchive, run_id: str) -> tuple[dict[str, bytes], object]:
    """What sealing was before it read each file once: redact the whole tree, then hash it."""
    from tracetrial.archive import build_manifest, write_manifest

    archive.redact_tree()
    manifest = build_manifest(archive.paths.root, run_id)
    write_manifest(archive.paths.root, manifest)
    files = {p.relative_to(archive.paths.root).as_posix(): p.read_bytes()
             for p in archive.paths.root.rglob("*") if p.is_file() and not p.is_symlink()}
    return files, manifest


@pytest.mark.parametrize("redacted_before", [False, True])
def test_seal_after_a_redaction_pass_seals_what_two_passes_would(tmp_path: Path, redacted_before: bool) -> None:
    """The cell redacts its tree before the reconciliation, then seals: files the first pass found
    clean are hashed without being redacted again, but a file written or changed in between, a new
    one, and every file after the redactor learned a value are redacted as before."""
    import shutil

    def build(base: Path) -> RunArchive:
        archive = make_archive(base)
        archive.write_text("native/turn-1.stdout", "clean output\n")
        archive.copy_in(_src(base, "a.jsonl", f'{{"t": "{SECRET}"}}\n'), "native/a.jsonl")
        archive.copy_in(_src(base, "b.txt", "later-secret-42 is fine until learned\n"), "native/b.txt")
        (archive.paths.root / "workspace").mkdir()
        os.symlink("../native/b.txt", archive.paths.root / "workspace" / "link")
        return archive

    def after_first_pass(archive: RunArchive) -> None:
        root = archive.paths.root
        (root / "native" / "turn-1.stdout").write_text(f"changed {PLANTED}\n")  # rewritten since
        (root / "evidence" / "new.txt").write_text(f"Bearer {'x' * 20}\n")  # new since
        archive.write_json("summary.json", {"k": "v"})
        archive.redactor.add("later-secret-42")  # the gateway key is added like this

    one, two = build(tmp_path / "one"), build(tmp_path / "two")
    if redacted_before:
        one.redact_tree()
        two.redact_tree()
    after_first_pass(one)
    after_first_pass(two)
    manifest = one.seal("run-1")
    files = {p.relative_to(one.paths.root).as_posix(): p.read_bytes()
             for p in one.paths.root.rglob("*") if p.is_file() and not p.is_symlink()}
    expected_files, expected = _two_pass_seal(two, "run-1")
    assert manifest == expected and files == expected_files
    assert b"later-secret-42" not in files["native/b.txt"] and PLANTED.encode() not in files["native/turn-1.stdout"]
    assert verify_manifest(one.paths.root).ok
    shutil.rmtree(tmp_path / "two")


def _src(base: Path, name: str, text: str) -> Path:
    base.mkdir(parents=True, exist_ok=True)
    path = base / f"src-{name}"
    path.write_text(text)
    return path


def test_seal_redacts_a_file_changed_since_the_first_pass_even_without_the_redactor_changing(tmp_path: Path) -> None:
    """Content, not the path, decides: a file the first pass found clean and someone then wrote a
    secret into (same name, any size or time) is redacted at seal."""
    archive = make_archive(tmp_path)
    archive.write_text("native/log.txt", "x" * len(PLANTED) + "\n")
    archive.redact_tree()
    log = archive.paths.root / "native" / "log.txt"
    before = log.stat()
    log.write_text(PLANTED + "\n")
    os.utime(log, ns=(before.st_atime_ns, before.st_mtime_ns))
    assert (log.stat().st_size, log.stat().st_mtime_ns) == (before.st_size, before.st_mtime_ns)
    archive.seal("run-1")
    assert PLANTED.encode() not in log.read_bytes()
    assert verify_manifest(archive.paths.root).ok
