"""Writing files so that a reader never sees half of one (the archive, ledgers, reports), and
reading YAML fast."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

import yaml


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def atomic_write_text(path: Path, text: str, *, fsync: bool = False) -> Path:
    """Write ``text`` (UTF-8) to ``path`` through a temporary file in the same folder and an
    atomic rename; parents are created. A unique temporary name lets several processes write
    the same file (the last rename wins, never a mix). ``fsync`` makes the bytes durable
    before the rename (ledgers and simulator state, which must survive a killed server)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        # mkstemp makes the file private (0600); give it the mode a plain open() would.
        os.chmod(tmp, 0o666 & ~_umask())
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            fh.write(text)
            if fsync:
                fh.flush()
                os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
    return path


def load_yaml(text: str) -> Any:
    """Parse YAML safely, with libyaml's loader when PyYAML was built with it: the same
    documents (``tests/kernel/test_yaml_loader.py`` checks every committed pack file) in an
    eighth of the time, which every session pays once per pack file at collection."""
    return yaml.load(text, Loader=_YAML_LOADER)


_YAML_LOADER: Any = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
