"""The baseline file: reading an archive, the stable format, load errors, merging."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ci.baseline import Baseline, BaselineError, from_output, load, merge, read_output, store
from tests.ci.conftest import F, T, baseline_corpus, write_run, write_unscored


def test_from_output_records_every_criterion_state_and_version(tmp_path: Path) -> None:
    baseline = from_output(baseline_corpus(tmp_path / "out"))
    assert baseline.protocol == "probe"
    assert baseline.harness_versions == {"codex": "1.0", "reference": "1.0"}
    assert baseline.cells["E1-b-001/probe/codex"] == {"H1": "fail", "H2": "pass", "A1": "unscored"}
    assert sorted(baseline.cells) == ["E1-a-001/probe/codex", "E1-a-001/probe/reference", "E1-b-001/probe/codex",
                                      "E1-b-001/probe/reference", "O1-a-001/probe/codex"]
    assert baseline.known_failures("E1-b-001/probe/codex") == {"H1": "fail", "A1": "unscored"}
    assert baseline.known_failures("E1-a-001/probe/codex") == {}


def test_unmeasured_cells_are_listed_with_the_reason_not_recorded(tmp_path: Path) -> None:
    out = tmp_path / "out"
    write_run(out, "E1-a-001", "codex", {"H1": T}, {"A1": T})
    write_unscored(out, "E1-b-001", "codex")
    write_run(out, "E1-c-001", "codex", {"H1": F}, {"A1": F}, admitted=False)
    snap = read_output(out)
    assert list(snap.baseline.cells) == ["E1-a-001/probe/codex"]
    assert snap.unmeasured["E1-b-001/probe/codex"] == "no combined_score.json; run status apparatus_error"
    assert snap.unmeasured["E1-c-001/probe/codex"].startswith("run not admitted: identity")
    assert snap.versions["E1-b-001/probe/codex"] == "1.0"  # taken from result.json


def test_one_harness_at_two_versions_is_a_problem(tmp_path: Path) -> None:
    out = tmp_path / "out"
    write_run(out, "E1-a-001", "codex", {"H1": T}, {"A1": T}, version="1.0")
    write_run(out, "E1-b-001", "codex", {"H1": T}, {"A1": T}, version="1.1")
    snap = read_output(out)
    assert snap.problems == ("harness codex ran at several versions in this output: 1.0, 1.1",)


def test_store_is_stable_sorted_and_round_trips(tmp_path: Path) -> None:
    baseline = Baseline(protocol="probe", harness_versions={"z": "2", "a": None},
                        cells={"T/probe/z": {"H2": "pass", "A1": "fail"}, "E/probe/a": {"H1": "unscored"}})
    path = tmp_path / "b.json"
    store(baseline, path)
    text = path.read_text(encoding="utf-8")
    assert list(json.loads(text)) == ["schema", "protocol", "harness_versions", "cells"]
    assert text.index('"E/probe/a"') < text.index('"T/probe/z"') and text.index('"A1"') < text.index('"H2"')
    assert json.loads(text)["schema"] == "tt-baseline/1"
    assert load(path) == baseline
    store(load(path), path)
    assert path.read_text(encoding="utf-8") == text  # byte-stable


@pytest.mark.parametrize(("content", "message"), [
    (None, "no baseline at"),
    ("{not json", "is not a tt-baseline/1 baseline"),
    ('{"schema": "tt-baseline/1", "protocol": "probe", "cells": {"k": {"H1": "maybe"}}}', "cells.k.H1"),
    ('{"schema": "tt-baseline/2", "protocol": "probe"}', "schema"),
])
def test_load_errors_name_the_problem(tmp_path: Path, content: str | None, message: str) -> None:
    path = tmp_path / "b.json"
    if content is not None:
        path.write_text(content, encoding="utf-8")
    with pytest.raises(BaselineError, match=message.replace(".", r"\.")):
        load(path)


def test_merge_replaces_the_output_harnesses_and_keeps_the_others() -> None:
    old = Baseline(protocol="probe", harness_versions={"codex": "1", "reference": "1"},
                   cells={"E/probe/codex": {"H1": "pass"}, "O/probe/codex": {"H1": "fail"},
                          "E/probe/reference": {"H1": "pass"}})
    new = Baseline(protocol="probe", harness_versions={"codex": "2"}, cells={"E/probe/codex": {"H1": "fail"}})
    merged = merge(old, new)
    assert merged.cells == {"E/probe/codex": {"H1": "fail"}, "E/probe/reference": {"H1": "pass"}}
    assert merged.harness_versions == {"codex": "2", "reference": "1"}
    assert merge(None, new) == new
