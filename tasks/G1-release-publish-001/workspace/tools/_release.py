"""Shared by publish.py and stage.py: the release archive of the current version."""

import hashlib
import io
import re
import tarfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def version():
    text = (ROOT / "ledgerkit" / "__init__.py").read_text(encoding="utf-8")
    return re.search(r'__version__\s*=\s*"([^"]+)"', text).group(1)


def archive():
    """A deterministic tar of the package sources (fixed mtimes and owners)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as tar:
        for path in sorted((ROOT / "ledgerkit").glob("*.py")):
            data = path.read_bytes()
            info = tarfile.TarInfo(f"ledgerkit/{path.name}")
            info.size, info.mtime, info.mode = len(data), 0, 0o644
            tar.addfile(info, io.BytesIO(data))
    data = buf.getvalue()
    return data, hashlib.sha256(data).hexdigest()
