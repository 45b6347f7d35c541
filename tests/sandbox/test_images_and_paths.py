"""Pure parts of the sandbox layer: image tags, the launcher's container arguments, what a
cell hides, which code stays visible, how ``auto`` and explicit backends resolve for a cell."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from apparatus.sandbox import (
    BWRAP_INSTALL,
    BwrapSandbox,
    SandboxUnavailable,
    choice,
    choose_backend,
    code_paths,
    resolve_sandbox,
)
from apparatus.sandbox.code import harness_code_paths
from apparatus.sandbox.docker_backend import DOCKER_INSTALL
from apparatus.sandbox.docker_run import Bind, DockerRunSpec, create_args
from apparatus.sandbox.images import BASE_REPO, HARNESS_REPO, image_tags
from harnesses.registry import BUILTIN
from tests.conftest import REPO
from tracetrial_fixtures.cell import _hidden_paths
from tracetrial_fixtures.session import Session
from tracetrial_fixtures.settings import Settings


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
    with pytest.raises(SandboxUnavailable, match="network: none, which the local sandbox cannot provide") as exc:
        choose_backend("local", network="none")
    assert exc.value.reason == "--tt-sandbox local was asked for" and exc.value.install is None
    assert choose_backend("local", network="loopback") == "local"


@pytest.fixture
def machine(monkeypatch: pytest.MonkeyPatch) -> dict[str, str | None]:
    """What the backend probes answer, set by the test (``None``: the backend runs here)."""
    answers: dict[str, str | None] = {"docker": None, "bwrap": None}
    for name in ("docker", "bwrap"):
        monkeypatch.setitem(choice.PROBES, name, lambda name=name: answers[name])
    return answers


def test_auto_prefers_docker_then_bwrap_then_local(machine: dict[str, str | None]) -> None:
    assert choose_backend("auto") == "docker"
    machine["docker"] = "no docker engine answers"
    assert choose_backend("auto") == "bwrap" and choose_backend("auto", network="none") == "bwrap"
    machine["bwrap"] = "bwrap does not run here"
    assert choose_backend("auto") == "local"
    with pytest.raises(SandboxUnavailable, match=r"cannot provide \(neither docker nor bwrap runs here\)") as exc:
        choose_backend("auto", network="none")
    assert exc.value.install == f"{DOCKER_INSTALL} or {BWRAP_INSTALL}"


def test_an_explicit_backend_that_does_not_run_says_why_and_how_to_install_it(
        machine: dict[str, str | None]) -> None:
    machine["docker"] = "no docker engine answers (FileNotFoundError)"
    with pytest.raises(SandboxUnavailable) as exc:
        choose_backend("docker")
    assert str(exc.value) == ("sandbox backend 'docker' unavailable: no docker engine answers (FileNotFoundError) "
                              f"(install: {DOCKER_INSTALL})")
    assert exc.value.reason == machine["docker"] and exc.value.install == DOCKER_INSTALL
    assert choose_backend("bwrap", network="none") == "bwrap"  # an explicit backend that runs is kept
    with pytest.raises(RuntimeError, match="docker"):  # resolve_sandbox builds from the same choice
        resolve_sandbox("docker")
    assert resolve_sandbox("auto").name == "bwrap"
    with pytest.raises(ValueError, match="unknown sandbox backend 'podman'"):
        choose_backend("podman")


def test_unconfinable_harness_runs_local_under_auto(machine: dict[str, str | None]) -> None:
    why = "it forks its own daemon"
    assert choose_backend("auto", harness="thirdparty", unconfinable=why) == "local"
    with pytest.raises(SandboxUnavailable, match="it forks its own daemon"):
        choose_backend("auto", network="none", harness="thirdparty", unconfinable=why)
    with pytest.raises(SandboxUnavailable, match="sandbox backend 'bwrap' unsupported for thirdparty: it forks"):
        choose_backend("bwrap", harness="thirdparty", unconfinable=why)
    # Every built-in harness is confinable: the session names none of them.
    settings = Settings(harnesses=None, models=("probe",), sandbox="auto", output=Path("out"), judge=None,
                        rerun=False, record_bodies=False, tasks_dir=None)
    assert not set(Session(settings).unconfinable) & set(BUILTIN)


def _fake_dist(site: Path, name: str, module: str, direct_url: dict[str, object] | None = None) -> None:
    """An installed distribution's metadata (no installer run) registering harness ``module``."""
    dist = site / f"{name}-1.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: 1.0\n")
    (dist / "entry_points.txt").write_text(f"[tracetrial.harnesses]\n{name} = {module}.adapter:Adapter\n")
    if direct_url is not None:
        (dist / "direct_url.json").write_text(json.dumps(direct_url))


def test_code_paths_include_every_third_party_harness(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """An editable harness's project folder (``direct_url.json``) and each harness module's
    folder are visible to the confined harness; finding them imports none of its code."""
    project = tmp_path / "acme-project"  # editable: the metadata names the project folder
    (project / "acme_editable").mkdir(parents=True)
    (project / "acme_editable" / "__init__.py").write_text("raise RuntimeError('imported at collection')\n")
    (project / "scripts").mkdir()
    site = tmp_path / "site"
    _fake_dist(site, "acme_editable_dist", "acme_editable",
               {"url": project.as_uri(), "dir_info": {"editable": True}})
    plain = tmp_path / "elsewhere" / "acme_plain"  # a plain install outside the Python prefix
    plain.mkdir(parents=True)
    (plain / "__init__.py").write_text("raise RuntimeError('imported at collection')\n")
    _fake_dist(tmp_path / "elsewhere", "acme_plain_dist", "acme_plain",
               {"url": "https://example.invalid/acme_plain-1.0.whl", "archive_info": {}})
    for path in (site, project, tmp_path / "elsewhere"):
        monkeypatch.syspath_prepend(str(path))
    before = code_paths()
    assert project.resolve() in harness_code_paths() and plain.resolve() in harness_code_paths()
    assert project.resolve() in before and plain.resolve() in before
    assert project.resolve() / "acme_editable" not in before  # inside the project folder: one mount
    assert "acme_editable" not in sys.modules and "acme_plain" not in sys.modules
    argv = BwrapSandbox(binary="bwrap").wrap(["true"], cwd=Path("/"), env={}, writable=[], hidden=[])
    for path in (project, plain):
        at = argv.index(str(path.resolve()))
        assert argv[at - 1] == "--ro-bind" and argv[at + 1] == str(path.resolve())


def test_a_harness_inside_the_python_installation_adds_no_mount(tmp_path: Path,
                                                               monkeypatch: pytest.MonkeyPatch) -> None:
    prefix = tmp_path / "prefix"
    site = prefix / "lib" / "site-packages"
    (site / "acme_installed").mkdir(parents=True)
    (site / "acme_installed" / "__init__.py").write_text("")
    _fake_dist(site, "acme_installed_dist", "acme_installed")
    monkeypatch.syspath_prepend(str(site))
    monkeypatch.setattr(sys, "prefix", str(prefix))
    assert (site / "acme_installed").resolve() in harness_code_paths()
    paths = code_paths()
    assert prefix.resolve() in paths and (site / "acme_installed").resolve() not in paths


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
    which = real_shutil.which
    monkeypatch.setattr(backend.shutil, "which", lambda name: None if name == "debootstrap" else which(name))
    monkeypatch.setattr(docker, "from_env", lambda **kw: Client())
    reason = backend.docker_reason()
    if image_present:
        assert reason is None
    else:
        assert reason and "debootstrap" in reason and "tracetrial images build" in reason


def test_docker_needs_no_command_line_client(monkeypatch: pytest.MonkeyPatch) -> None:
    """The cell's keeper starts its processes (no ``docker exec``): an engine without the
    command-line client is a backend all the same."""
    import shutil as real_shutil

    from apparatus.sandbox import docker_backend as backend

    which = real_shutil.which
    monkeypatch.setattr(backend, "_ENGINE", {"reason": None})
    monkeypatch.setattr(backend.shutil, "which", lambda name: None if name in ("docker", "debootstrap") else which(name))

    class Images:
        def get(self, tag: str) -> object:
            return object()

    class Client:
        images = Images()

    import docker

    monkeypatch.setattr(docker, "from_env", lambda **kw: Client())
    assert backend.docker_reason() is None
