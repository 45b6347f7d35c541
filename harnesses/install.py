"""Project-local installs of the pinned harness CLIs (``tracetrial install``).

npm packages are pinned in ``harnesses/package.json`` + ``package-lock.json`` and
installed with ``npm ci`` into ``<repo>/.tt-tools/`` (or ``$TT_TOOLS_DIR``), so
the versions measured are exactly the committed ones.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
REPO = HERE.parent

#: harness name -> binaries it needs under node_modules/.bin
NPM_HARNESSES: dict[str, tuple[str, ...]] = {
    "claude_code": ("claude",),
    "codex": ("codex",),
}


def tools_dir() -> Path:
    return Path(os.environ.get("TT_TOOLS_DIR", REPO / ".tt-tools"))


def tool_bin(name: str) -> Path | None:
    """Path of an installed CLI binary, or None."""
    path = tools_dir() / "node_modules" / ".bin" / name
    return path if path.exists() else None


def install_hint(harness: str) -> str:
    return f"{harness} is not installed; run: tracetrial install {harness}"


def install(harnesses: list[str] | None, *, root: Path | None = None) -> int:
    """Install the pinned CLIs; returns a process exit code."""
    names = harnesses or sorted(NPM_HARNESSES) + ["reference"]
    unknown = [n for n in names if n not in NPM_HARNESSES and n != "reference"]
    if unknown:
        print(f"error: no installer for {', '.join(unknown)}; known: {', '.join(sorted(NPM_HARNESSES))}, reference",
              file=sys.stderr)
        return 2
    if not any(n in NPM_HARNESSES for n in names):
        print("reference harness: nothing to install (it ships with TraceTrial)")
        return 0
    npm = shutil.which("npm")
    if npm is None:
        print("error: npm not found; install Node.js 20+ and npm (apt-get install -y nodejs npm)", file=sys.stderr)
        return 2
    target = root or tools_dir()
    target.mkdir(parents=True, exist_ok=True)
    for name in ("package.json", "package-lock.json"):
        shutil.copy2(HERE / name, target / name)
    print(f"installing pinned harness CLIs into {target} (npm ci) ...", flush=True)
    proc = subprocess.run([npm, "ci", "--no-audit", "--no-fund", "--loglevel=error"], cwd=target)
    if proc.returncode != 0:
        print(f"error: npm ci failed with exit code {proc.returncode}", file=sys.stderr)
        return proc.returncode
    missing = [b for n in names if n in NPM_HARNESSES for b in NPM_HARNESSES[n]
               if not (target / "node_modules" / ".bin" / b).exists()]
    if missing:
        print(f"error: installed, but binaries are missing: {', '.join(missing)}", file=sys.stderr)
        return 1
    for n in names:
        for b in NPM_HARNESSES.get(n, ()):
            out = subprocess.run([str(target / "node_modules" / ".bin" / b), "--version"],
                                 capture_output=True, text=True, timeout=60)
            print(f"{n}: {out.stdout.strip() or out.stderr.strip()}")
    return 0
