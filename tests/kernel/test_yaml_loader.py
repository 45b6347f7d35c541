"""The fast YAML loader reads every committed pack file exactly as PyYAML's pure safe loader does."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tracetrial.files import load_yaml

TASKS = Path(__file__).resolve().parents[2] / "tasks"


def _pack_yaml_files() -> list[Path]:
    return sorted(p for p in TASKS.glob("*/**/*.y*ml") if p.is_file() and p.suffix in (".yaml", ".yml"))


def test_every_pack_file_loads_the_same() -> None:
    files = _pack_yaml_files()
    assert len(files) > 100  # the suite's packs are there
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert load_yaml(text) == yaml.safe_load(text), path


@pytest.mark.parametrize("text", ["a: [1, 2", "a: b: c", "- x\ny: 1"])
def test_malformed_yaml_raises_the_yaml_error_with_its_position(text: str) -> None:
    with pytest.raises(yaml.YAMLError) as info:
        load_yaml(text)
    assert getattr(info.value, "problem_mark", None) is not None


def test_no_object_construction() -> None:
    with pytest.raises(yaml.YAMLError):
        load_yaml("!!python/object/apply:os.system ['true']")
