"""Pure parts of the sandbox layer: image tags, the launcher's container arguments, what a
cell hides, how ``auto`` and explicit backends resolve for a cell."""

from __future__ import annotations

from pathlib import Path

import pytest

from apparatus.sandbox.docker_run import Bind, DockerRunSpec, create_args
from apparatus.sandbox.images import BASE_REPO, HARNESS_REPO, image_tags
from tests.conftest import REPO
from tracetrial_fixtures.cell import _hidden_paths


def test_image_tags_follow_the_lockfile(tmp_path: Path) -> None:
    (tmp_path / "package-lock.json").write_text('{"lockfileVersion": 3, "packages": {"a": "1"}}')
    first = image_tags(tmp_path)
    assert first.base.startswith(f"{BASE_REPO}:bookworm-") and first.harnesses.startswith(f"{HARNESS_REPO}:")
    assert image_tags(tmp_path) == first  # a tag names one content
    (tmp_path / "package-lock.json").write_text('{"lockfileVersion": 3, "packages": {"a": "2"}}')
    second = image_tags(tmp_path)
    assert second.base == first.base and second.harnesses != first.harnesses  # a new pin, a new image


class _FakeApi:
    def create_host_config(self, **kw: object) -> dict[str, object]:
        return dict(kw)


def test_container_arguments() -> None:
    spec = DockerRunSpec(image="img:1", name="tt-x-1", argv=["sh", "-c", "true"], env={"A": "1"}, cwd="/w",
                         binds=[Bind(source="/w", target="/w", read_only=False)], tmpfs=["/w/private"],
                         network="none", memory_mb=512, cpus=1.5, pids=64)
    args = create_args(spec, _FakeApi())
    host = args["host_config"]
    assert args["command"] == ["sh", "-c", "true"] and args["environment"] == {"A": "1"}
    assert host["network_mode"] == "none" and host["init"] is True
    assert host["mem_limit"] == "512m" and host["nano_cpus"] == 1_500_000_000 and host["pids_limit"] == 64
    assert host["tmpfs"] == {"/w/private": "size=1m,mode=0755"}
    assert "security_opt" not in host and "MaskedPaths" not in host  # docker's defaults kept
    nested = create_args(spec.model_copy(update={"nested_namespaces": True}), _FakeApi())["host_config"]
    assert nested["security_opt"] == ["seccomp=unconfined", "apparmor=unconfined"]
    assert nested["MaskedPaths"] == [] and nested["ReadonlyPaths"] == []


def test_hidden_paths_cover_every_pack(tmp_path: Path) -> None:
    """All packs' truths are private, not only the cell's own — unless the packs' folder
    also holds code the harness runs (then only the pack itself)."""
    pack = REPO / "tasks" / "E1-build-status-001"
    assert _hidden_paths(tmp_path / "out", pack) == [tmp_path / "out", pack, (REPO / "tasks").resolve()]
    assert _hidden_paths(tmp_path / "out", REPO / "mypack") == [tmp_path / "out", REPO / "mypack"]


def test_local_refuses_network_none() -> None:
    from tracetrial_fixtures.scoring import _resolve_sandbox

    with pytest.raises(pytest.skip.Exception, match="network: none, which the local sandbox cannot provide"):
        _resolve_sandbox("local", "reference", "none")
    assert _resolve_sandbox("local", "reference", "loopback") == "local"


def test_unconfinable_harness_runs_local_under_auto(monkeypatch: pytest.MonkeyPatch) -> None:
    from tracetrial_fixtures import scoring

    monkeypatch.setitem(scoring.SANDBOX_UNSUPPORTED, "thirdparty", "it forks its own daemon")
    assert scoring._resolve_sandbox("auto", "thirdparty", "loopback") == "local"
    with pytest.raises(pytest.skip.Exception, match="it forks its own daemon"):
        scoring._resolve_sandbox("auto", "thirdparty", "none")
    # Every built-in harness is confinable: DeepSeek gets the same backend as the reference.
    assert scoring._resolve_sandbox("auto", "deepseek", "loopback") == scoring._resolve_sandbox(
        "auto", "reference", "loopback")


def test_failed_image_build_is_reported_once_not_retried(monkeypatch: pytest.MonkeyPatch) -> None:
    """A broken build (say, no Debian mirror) fails every docker cell with the same precise
    message, without re-running debootstrap for each."""
    import docker

    from apparatus.sandbox import docker_backend as backend
    from apparatus.sandbox.images import ImageError

    calls = []

    def broken(client: object = None, **kw: object) -> None:
        calls.append(1)
        raise ImageError("debootstrap failed (exit 1): E: Failed getting release file")

    monkeypatch.setattr(backend, "_IMAGES", {})
    monkeypatch.setattr(backend, "_FAILED", {})
    monkeypatch.setattr(backend, "build_images", broken)
    monkeypatch.setattr(backend, "sweep_orphans", lambda client: [])
    monkeypatch.setattr(docker, "from_env", lambda **kw: object())
    for _ in range(3):
        box = backend.DockerSandbox()
        with pytest.raises(ImageError, match="debootstrap failed .* release file"):
            box.prepare()
        box.cleanup()
    assert len(calls) == 1


@pytest.mark.parametrize("image_present", [True, False])
def test_docker_needs_an_image_or_a_way_to_build_it(monkeypatch: pytest.MonkeyPatch, image_present: bool) -> None:
    """An engine alone is not enough for ``auto`` to pick docker: without debootstrap the
    image must already exist (else auto falls back to bwrap instead of failing every cell)."""
    import shutil as real_shutil

    import docker

    from apparatus.sandbox import docker_backend as backend

    class Images:
        def get(self, tag: str) -> object:
            if image_present:
                return object()
            raise docker.errors.ImageNotFound(tag)

    class Client:
        images = Images()

    monkeypatch.setattr(backend, "_ENGINE", {"reason": None})  # an engine answers
    monkeypatch.setattr(backend.shutil, "which", lambda name: None if name == "debootstrap" else real_shutil.which(name))
    monkeypatch.setattr(docker, "from_env", lambda **kw: Client())
    reason = backend.docker_reason()
    if image_present:
        assert reason is None
    else:
        assert reason and "debootstrap" in reason and "tracetrial images build" in reason
