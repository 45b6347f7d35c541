"""``VerifierContext.workspace_yaml``: plain data from a YAML workspace file, a reason otherwise."""

from __future__ import annotations

from pathlib import Path

from tracetrial.verify import VerifierContext


def _ctx(tmp_path: Path) -> VerifierContext:
    return VerifierContext(workspace=tmp_path, baseline=tmp_path, truth=None, oracle=None, events=[], gateway=[],
                           probe=None, ledgers={}, run_dir=tmp_path)


def test_workspace_yaml_reads_plain_data_and_explains_the_rest(tmp_path: Path) -> None:
    (tmp_path / "ok.yaml").write_text("region: eu-central-1\nshards: [a, b]\n")
    (tmp_path / "bad.yaml").write_text("region: [\n")
    (tmp_path / "list.yaml").write_text("- a\n")
    (tmp_path / "obj.yaml").write_text("x: !!python/object/apply:os.system ['true']\n")
    ctx = _ctx(tmp_path)
    assert ctx.workspace_yaml("ok.yaml", want=dict) == ({"region": "eu-central-1", "shards": ["a", "b"]}, None)
    for rel, why in (("bad.yaml", "missing or invalid"), ("missing.yaml", "missing or invalid"),
                     ("list.yaml", "is not a mapping"), ("obj.yaml", "missing or invalid")):
        value, reason = ctx.workspace_yaml(rel, want=dict)
        assert value is None and reason is not None and why in reason, (rel, reason)
