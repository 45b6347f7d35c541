"""The confinement policy shared by the bwrap and docker backends: what of the host a
confined harness sees.

An allow-list, never the host minus holes (a deny-list always misses the next thing —
the docker socket, another pack's truth, an earlier run's archive):

* **system** (bwrap only; docker has its image): the programs and libraries under
  :data:`SYSTEM_PATHS` and the few :data:`ETC_ENTRIES` programs read (users, name
  resolution, TLS roots, the dynamic linker's cache, alternatives, time zone);
* **code**, read-only (:func:`~apparatus.sandbox.code.code_paths`): the checkout's code
  packages, the pinned CLIs, the Python installation, every third-party harness;
* **scratch**, writable: the run's workspace and HOME (and the helper folders of the
  sandbox itself: exit-status files, the gateway tunnel, the host bridge's sockets).

Nothing else: no ``/run``/``/var/run`` (the docker socket, dbus), no host ``/tmp``, no
``/home``/``/root``, no task pack, ledger, baseline or archive of any run. The harness's
own native records are written in its scratch and copied into the archive by the
apparatus after the process ends; the archive is never writable from inside.

``hidden`` paths are only covered where they would otherwise show (inside a visible
folder): a task pack inside a third-party harness's project, the committed baselines
inside the ``ci`` package (:data:`~apparatus.sandbox.code.CHECKOUT_DATA`).
"""

from __future__ import annotations

import os
import shutil
import stat
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

from apparatus.sandbox.code import code_data_paths, code_paths

__all__ = ["ETC_ENTRIES", "SYSTEM_PATHS", "Exposure", "collect_records", "copy_record", "exposure", "is_record", "is_record_folder"]

#: Host folders of programs and shared libraries (bwrap); merged-``/usr`` symlinks
#: (``/bin -> usr/bin``) are reproduced as symlinks.
SYSTEM_PATHS = ("/usr", "/bin", "/sbin", "/lib", "/lib32", "/lib64", "/libx32")
#: What of ``/etc`` programs read (bwrap): users and groups, name resolution, TLS roots,
#: the dynamic linker, ``update-alternatives`` links, time zone, MIME and terminal data.
ETC_ENTRIES = (
    "passwd", "group", "hosts", "host.conf", "nsswitch.conf", "resolv.conf", "gai.conf", "protocols", "services",
    "ssl", "ca-certificates", "ca-certificates.conf", "pki", "alternatives", "ld.so.cache", "ld.so.conf",
    "ld.so.conf.d", "localtime", "timezone", "mime.types", "os-release", "debian_version", "terminfo", "inputrc",
    "bash.bashrc", "profile", "magic", "magic.mime",
)


@dataclass(frozen=True)
class Exposure:
    """What one confined process sees of the host, besides the system (bwrap) or the
    image (docker). Every path is absolute, resolved and exists."""

    #: Code, mounted read-only at its host path.
    code: tuple[Path, ...]
    #: Scratch and sandbox helper folders, mounted read-write at their host paths.
    writable: tuple[Path, ...]
    #: Folders inside a mounted one that are covered by an empty tmpfs.
    covered: tuple[Path, ...]


def _existing(paths: Iterable[Path]) -> list[Path]:
    seen: list[Path] = []
    for p in paths:
        r = Path(p).resolve()
        if r.exists() and r not in seen and r != Path("/"):
            seen.append(r)
    return seen


def exposure(writable: Sequence[Path], hidden: Sequence[Path], *, code: Sequence[Path] | None = None) -> Exposure:
    """The policy for one process: ``code`` (default :func:`code_paths`) read-only,
    ``writable`` read-write, and each ``hidden`` path (plus the data inside the code
    packages) covered where a mounted folder would show it."""
    ro = _existing(code_paths() if code is None else code)
    rw = _existing(writable)
    mounted = ro + rw
    covered = [h for h in _existing([*hidden, *code_data_paths()])
               if any(h.is_relative_to(m) for m in mounted) and h not in mounted]
    return Exposure(code=tuple(ro), writable=tuple(rw), covered=tuple(covered))


def collect_records(src: Path, dest: Path, only: Sequence[str] | None = None) -> list[Path]:
    """Copy what a confined process left in ``src`` (its scratch) into ``dest`` (the archive),
    after the process has ended: regular files only, at the same relative paths, and only
    under the top-level names ``only`` when given (the records the harness writes: a file
    the agent dropped beside them, or one named like a record the apparatus itself writes
    into ``dest``, is not archived).

    A symlink is never followed and a special file never read: a confined process could
    point one at a host file the sandbox never showed it, and the host-side copy would
    then archive that file as the harness's record. Returns the files written."""
    copied: list[Path] = []
    if src.is_symlink() or not src.is_dir():
        return copied
    for folder, dirs, files in os.walk(src):  # os.walk does not descend into symlinked folders
        base = Path(folder)
        top = base == src
        dirs[:] = sorted(d for d in dirs if not (base / d).is_symlink() and (not top or only is None or d in only))
        for name in sorted(files):
            file = base / name
            if (top and only is not None and name not in only) or file.is_symlink() or not stat.S_ISREG(file.lstat().st_mode):
                continue
            target = dest / file.relative_to(src)
            target.parent.mkdir(parents=True, exist_ok=True)
            shutil.copyfile(file, target, follow_symlinks=False)
            copied.append(target)
    return copied


def is_record(path: Path, scratch: Path) -> bool:
    """Whether ``path`` may be read on the host as a record a confined process left in
    ``scratch``: a regular file (never a symlink or a special file) whose real location is
    inside ``scratch`` (a symlinked folder on the way could point anywhere on the host).
    Adapters that pick their records by pattern (``glob``) ask this before reading one."""
    try:
        mode = path.lstat().st_mode
    except OSError:
        return False
    if path.is_symlink() or not stat.S_ISREG(mode):
        return False
    return Path(os.path.realpath(path)).is_relative_to(os.path.realpath(scratch))


def copy_record(path: Path, target: Path, scratch: Path) -> Path | None:
    """Copy one record ``path`` (see :func:`is_record`) to ``target`` in the archive; ``None``
    (nothing copied) when it is not a record of ``scratch``."""
    if not is_record(path, scratch):
        return None
    target.parent.mkdir(parents=True, exist_ok=True)
    shutil.copyfile(path, target, follow_symlinks=False)
    return target


def is_record_folder(path: Path, scratch: Path) -> bool:
    """Whether ``path`` is a real folder (not a symlink) whose real location is inside
    ``scratch``, so :func:`collect_records` may walk it."""
    return (not path.is_symlink() and path.is_dir()
            and Path(os.path.realpath(path)).is_relative_to(os.path.realpath(scratch)))
