"""Local images for the docker sandbox (``tracetrial images build``), built with no registry.

Two layers, each tagged by a hash of what it is made of, so a tag names one content:

* **base** — a Debian root filesystem made with ``debootstrap --variant=minbase`` plus the
  few packages the confined processes need (``python3`` for task scripts, ``git``, the
  shared libraries the benchmark's own Python runtime links against), imported with
  ``docker import``. Nothing is pulled from a registry.
* **harnesses** — ``FROM`` the base, ``COPY`` of the pinned harness installs (the
  ``npm ci`` tree of ``harnesses/package-lock.json``, ``.tt-tools/``) to
  :data:`IMAGE_TOOLS_DIR`; its tag hashes the lockfile and the base tag, so a changed pin
  means a new image.

Builds are cached (an existing tag is reused) and serialized by a file lock, so xdist
workers that ask for the image at the same time build it once.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import tempfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from filelock import FileLock

from apparatus.tools import NODE_RUNTIME_PACKAGE, tools_dir

__all__ = ["BASE_PACKAGES", "IMAGE_TOOLS_DIR", "ImageError", "Images", "build_images", "image_tags"]

DEBIAN_SUITE = "bookworm"
DEBIAN_MIRROR = os.environ.get("TT_DEBIAN_MIRROR", "http://deb.debian.org/debian")
#: Packages added to the minbase root filesystem. ``python3`` and ``git``: task scripts and
#: harnesses call them. The libraries: what the benchmark's own Python (bind-mounted
#: read-only at its host path, it runs the reference harness and the simulator relay) and
#: the pinned Node runtime link against.
BASE_PACKAGES = (
    "python3", "git", "procps", "ca-certificates", "libssl3", "libffi8", "libsqlite3-0", "libgdbm6",
    "libuuid1", "libbz2-1.0", "liblzma5", "libncursesw6", "libreadline8", "zlib1g", "libexpat1",
    "libstdc++6", "libgcc-s1", "libtirpc3", "libcrypt1",
)
#: Where the harnesses layer puts the pinned CLI installs inside the image.
IMAGE_TOOLS_DIR = "/opt/tracetrial/tools"
BASE_REPO = "tracetrial-base"
HARNESS_REPO = "tracetrial-harnesses"
#: Not copied into the image: Node's compile cache, and the named harness versions
#: (``tracetrial install <name>@<version>``; the image carries only the pins, and its tag
#: hashes only their lock).
_IGNORE = ("node-compile-cache", "versions")



class ImageError(RuntimeError):
    """An image could not be built; the message says which step failed and how to fix it."""


@dataclass(frozen=True)
class Images:
    """The tags (and the harness image's id) a docker cell runs on."""

    base: str
    harnesses: str
    harnesses_id: str = ""


def _cache_dir() -> Path:
    root = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "tracetrial" / "images"
    root.mkdir(parents=True, exist_ok=True)
    return root


def image_tags(tools: Path | None = None) -> Images:
    """The tags of the two layers for the current pins (pure: hashes only)."""
    base_key = hashlib.sha256(f"{DEBIAN_SUITE}|minbase|{','.join(BASE_PACKAGES)}".encode()).hexdigest()[:12]
    base = f"{BASE_REPO}:{DEBIAN_SUITE}-{base_key}"
    tools = tools or tools_dir()
    lock = tools / "package-lock.json"
    lock_bytes = lock.read_bytes() if lock.exists() else b"no-tools"
    recipe = _dockerfile(base, "").encode()
    tools_key = hashlib.sha256(recipe + b"|" + lock_bytes).hexdigest()[:12]
    return Images(base=base, harnesses=f"{HARNESS_REPO}:{tools_key}")


def _dockerfile(base: str, lock_digest: str) -> str:
    """The harnesses layer: the pinned installs, and ``node`` on PATH as the pinned Node
    runtime (npm bin wrappers such as ``codex`` start with ``#!/usr/bin/env node``)."""
    return (
        f"FROM {base}\n"
        f'LABEL org.tracetrial.layer="harnesses" org.tracetrial.lock-sha256="{lock_digest}"\n'
        f"COPY . {IMAGE_TOOLS_DIR}\n"
        f"RUN ln -s {IMAGE_TOOLS_DIR}/node_modules/{NODE_RUNTIME_PACKAGE}/bin/node /usr/local/bin/node && node --version\n"
    )


def _exists(client: Any, tag: str) -> str | None:
    import docker.errors

    try:
        return str(client.images.get(tag).id)
    except docker.errors.ImageNotFound:
        return None


def _build_base(client: Any, tag: str, log: Callable[[str], None]) -> None:
    debootstrap = shutil.which("debootstrap")
    if debootstrap is None:
        raise ImageError("debootstrap is not installed (needed once to build the base image); "
                         "install it with: apt-get install -y debootstrap")
    with tempfile.TemporaryDirectory(prefix="tt-rootfs-", dir=_cache_dir()) as tmp:
        rootfs = Path(tmp) / "rootfs"
        log(f"debootstrap {DEBIAN_SUITE} (minbase + {len(BASE_PACKAGES)} packages) from {DEBIAN_MIRROR}")
        proc = subprocess.run([debootstrap, "--variant=minbase", f"--include={','.join(BASE_PACKAGES)}",
                               DEBIAN_SUITE, str(rootfs), DEBIAN_MIRROR],
                              capture_output=True, text=True, check=False)
        if proc.returncode != 0:
            tail = (proc.stdout + proc.stderr).strip().splitlines()[-5:]
            raise ImageError(f"debootstrap failed (exit {proc.returncode}): " + " | ".join(tail))
        # apt lists and caches only bloat the layer.
        for sub in ("var/cache/apt/archives", "var/lib/apt/lists"):
            shutil.rmtree(rootfs / sub, ignore_errors=True)
        tarball = Path(tmp) / "rootfs.tar"
        subprocess.run(["tar", "-C", str(rootfs), "--numeric-owner", "-cf", str(tarball), "."], check=True)
        log(f"docker import → {tag}")
        repo, _, version = tag.partition(":")
        with tarball.open("rb") as fh:
            client.api.import_image_from_data(fh, repository=repo, tag=version,
                                              changes=['CMD ["/bin/bash"]', "ENV LANG=C.UTF-8"])


def _build_harnesses(client: Any, base: str, tag: str, tools: Path, log: Callable[[str], None]) -> None:
    import docker.errors

    if not (tools / "node_modules").is_dir():
        raise ImageError(f"no pinned harness installs under {tools}; run: tracetrial install claude_code codex openclaw")
    lock = tools / "package-lock.json"
    digest = hashlib.sha256(lock.read_bytes()).hexdigest() if lock.exists() else ""
    (tools / ".dockerignore").write_text("\n".join(["Dockerfile.tracetrial", ".dockerignore", *_IGNORE]) + "\n")
    (tools / "Dockerfile.tracetrial").write_text(_dockerfile(base, digest))
    log(f"docker build {tag} (COPY {tools.name}/ → {IMAGE_TOOLS_DIR})")
    try:
        client.images.build(path=str(tools), dockerfile="Dockerfile.tracetrial", tag=tag, rm=True,
                            forcerm=True, network_mode="none")
    except docker.errors.BuildError as exc:
        lines = [str(c.get("stream") or c.get("error") or "").strip() for c in exc.build_log]
        raise ImageError(f"docker build of {tag} failed: {exc.msg}; last log: {' | '.join(x for x in lines if x)[-500:]}") from None


def _prune(client: Any, keep: Images, log: Callable[[str], None]) -> None:
    """Drop older tags of our two repositories (each is a GB-sized stale pin)."""
    import docker.errors

    for repo in (BASE_REPO, HARNESS_REPO):
        for image in client.images.list(name=repo):
            for tag in image.tags:
                if tag not in (keep.base, keep.harnesses):
                    try:
                        client.images.remove(tag)
                        log(f"removed stale image {tag}")
                    except docker.errors.APIError:
                        pass  # still used by a container; next build tries again


def build_images(client: Any = None, *, force: bool = False, log: Callable[[str], None] | None = None) -> Images:
    """Build (or reuse) the base and harnesses images; returns their tags. Locked across
    processes, so concurrent xdist workers build once."""
    import docker

    say = log or (lambda _msg: None)
    client = client or docker.from_env(timeout=600)
    tools = tools_dir()
    tags = image_tags(tools)
    with FileLock(str(_cache_dir() / "build.lock")):
        if force or _exists(client, tags.base) is None:
            _build_base(client, tags.base, say)
        if force or _exists(client, tags.harnesses) is None:
            _build_harnesses(client, tags.base, tags.harnesses, tools, say)
            _prune(client, keep=tags, log=say)
        image_id = _exists(client, tags.harnesses)
    if image_id is None:
        raise ImageError(f"image {tags.harnesses} missing after the build")
    return Images(base=tags.base, harnesses=tags.harnesses, harnesses_id=image_id)
