"""``permissions.protect`` and ``permissions.network`` (Governance: destructive-action control,
network restriction): validation, and eligibility of a harness that cannot apply them itself."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from tracetrial.eligibility import eligibility
from tracetrial.errors import TaskPackErrors
from tracetrial.harness import HarnessCapabilities
from tracetrial.task import PermissionSpec, load_task


def _with(pack: Path, **permissions: object) -> Path:
    data = yaml.safe_load((pack / "task.yaml").read_text())
    data["permissions"] = {"mode": "native", **permissions}
    (pack / "task.yaml").write_text(yaml.safe_dump(data))
    return pack


@pytest.mark.parametrize("path", ["data", ".git", "data/ledger.db", "a b/c", "data/"])
def test_protect_takes_workspace_relative_paths(path: str) -> None:
    assert PermissionSpec(mode="native", protect=[path]).protect == [path.rstrip("/")]


@pytest.mark.parametrize("path", ["", "/etc", "~/x", "../up", "a/../b", "./a", "a//b", "*.db", "data/[ab]", "a?"])
def test_protect_refuses_absolute_escaping_or_wildcard_paths(path: str) -> None:
    with pytest.raises(ValueError, match="workspace-relative path"):
        PermissionSpec(mode="native", protect=[path])


def test_network_is_allow_or_deny() -> None:
    assert PermissionSpec().network == "allow"
    assert PermissionSpec(mode="native", network="deny").network == "deny"
    with pytest.raises(ValueError):
        PermissionSpec(mode="native", network="loopback")  # type: ignore[arg-type]


@pytest.mark.parametrize("permissions", [{"protect": ["data"]}, {"network": "deny"}])
def test_protection_and_network_need_the_native_mode(example_pack: Path, permissions: dict[str, object]) -> None:
    data = yaml.safe_load((example_pack / "task.yaml").read_text())
    data["permissions"] = {"mode": "bypass", **permissions}
    (example_pack / "task.yaml").write_text(yaml.safe_dump(data))
    with pytest.raises(TaskPackErrors, match="set permissions.mode: native"):
        load_task(example_pack)


def test_a_harness_without_path_protection_is_non_comparable(example_pack: Path) -> None:
    task = load_task(_with(example_pack, protect=["data"]))
    state, reason = eligibility(task, HarnessCapabilities(native_permissions=True))
    assert state == "non_comparable" and reason is not None and "['data']" in reason
    assert eligibility(task, HarnessCapabilities(native_permissions=True, path_protection=True))[0] == "eligible"


def test_a_harness_without_a_network_setting_is_non_comparable(example_pack: Path) -> None:
    task = load_task(_with(example_pack, network="deny"))
    state, reason = eligibility(task, HarnessCapabilities(native_permissions=True))
    assert state == "non_comparable" and reason is not None and "network" in reason
    assert eligibility(task, HarnessCapabilities(network_policy=True))[0] == "eligible"


def test_a_path_the_harness_protects_by_default_needs_no_setting(example_pack: Path) -> None:
    git_only = load_task(_with(example_pack, protect=[".git"]))
    codex_like = HarnessCapabilities(native_permissions=True, protected_by_default=(".git",))
    assert eligibility(git_only, codex_like)[0] == "eligible"
    data = load_task(_with(example_pack, protect=[".git", "data"]))
    assert eligibility(data, codex_like)[0] == "non_comparable"
