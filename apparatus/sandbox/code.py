"""What a confined harness executes, kept visible (read-only) under every sandbox backend.

A sandbox shows a confined process nothing of the host but what it runs
(:mod:`apparatus.sandbox.policy`), and the code the harness runs must stay reachable: the
*code packages* of this checkout (:data:`CHECKOUT_PACKAGES`: the reference harness, the
relay module — never the task packs, outputs, tests or ``.git`` beside them, nor the data
inside a package, :data:`CHECKOUT_DATA`), the pinned CLIs (``.tt-tools/`` or
``$TT_TOOLS_DIR``) and the named harness versions installed next to them
(``<tools>/versions/``, its own entry: the docker image carries only the pins, so that
backend mounts this folder from the host), the Python installation — and the code of every *third-party*
harness, a distribution registering an adapter in the :data:`HARNESS_ENTRY_POINTS`
group. Such a distribution may live anywhere (an editable install from a temp folder is
the usual case while developing one), so its folders are found from its installed
metadata, never by importing it: importing user code while a session collects or
wraps a process would run that code outside any sandbox.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from importlib.metadata import Distribution, entry_points
from pathlib import Path
from urllib.parse import unquote, urlparse

__all__ = ["CHECKOUT_DATA", "CHECKOUT_PACKAGES", "HARNESS_ENTRY_POINTS", "checkout_root", "code_data_paths",
           "code_paths", "harness_code_paths"]

#: The entry-point group through which a distribution registers a harness adapter
#: (``name = "package.module:AdapterClass"``); read by :mod:`harnesses.registry` too.
HARNESS_ENTRY_POINTS = "tracetrial.harnesses"
#: The checkout's top-level code packages (``pyproject.toml``'s package list): all a
#: confined process sees of the checkout. ``tasks/``, ``outputs/``, ``tests/``, ``.git``
#: and everything else at the top stay out of every sandbox.
CHECKOUT_PACKAGES = ("tracetrial", "apparatus", "harnesses", "criteria", "reports", "ci", "tracetrial_fixtures",
                     "tracetrial_cli")
#: Data inside a code package, covered in every sandbox: the committed gate baselines.
CHECKOUT_DATA = ("ci/baselines",)


def checkout_root() -> Path:
    """The checkout this code runs from."""
    import tracetrial

    return Path(tracetrial.__file__).resolve().parents[1]


def code_data_paths() -> list[Path]:
    """The data folders inside the checkout's code packages (:data:`CHECKOUT_DATA`) that exist."""
    root = checkout_root()
    return [root / rel for rel in CHECKOUT_DATA if (root / rel).exists()]


def code_paths() -> list[Path]:
    """Every folder a confined harness executes from, shortest first: the checkout's code
    packages, the pinned CLIs and the named versions beside them, the Python installation and each third-party harness's code
    (:func:`harness_code_paths`), the last only where no other folder already holds it."""
    from apparatus.tools import tools_dir, versions_dir

    root = checkout_root()
    paths = {root / name for name in CHECKOUT_PACKAGES}
    paths |= {Path(sys.prefix).resolve(), Path(sys.base_prefix).resolve(), Path(sys.executable).resolve().parent,
              tools_dir().resolve(), versions_dir().resolve()}
    base = {p for p in paths if p.exists() and p != Path("/")}
    # A harness folder inside another listed folder (a harness installed into the Python
    # installation, a package inside its editable project) is already visible; binding it
    # again would only add mounts.
    harness = harness_code_paths()
    extra = {p for p in harness if not any(p != q and p.is_relative_to(q) for q in base | harness)}
    return sorted(base | extra, key=lambda p: (len(p.parts), str(p)))


def harness_code_paths() -> set[Path]:
    """The code folders of every installed distribution with a harness entry point: the
    source folder of an editable install (its ``direct_url.json``) and the folder of each
    entry point's top-level module (its import spec, found without importing it)."""
    found: set[Path] = set()
    for ep in entry_points(group=HARNESS_ENTRY_POINTS):
        if ep.dist is not None:
            source = _editable_source(ep.dist)
            if source is not None:
                found.add(source)
        found.update(_module_folders(ep.module.partition(".")[0]))
    return {p for p in found if p.exists() and p != Path("/")}


def _editable_source(dist: Distribution) -> Path | None:
    """The project folder an editable install points at (PEP 610 ``direct_url.json``)."""
    text = dist.read_text("direct_url.json")
    if not text:
        return None
    try:
        data = json.loads(text)
    except ValueError:
        return None
    url = urlparse(str(data.get("url", "")))
    editable = bool((data.get("dir_info") or {}).get("editable"))
    if not editable or url.scheme != "file":
        return None
    return Path(unquote(url.path)).resolve()


def _module_folders(top: str) -> list[Path]:
    """Where top-level module ``top`` would be imported from. ``find_spec`` of a top-level
    name runs the import system's finders only, never the module's own code."""
    try:
        spec = importlib.util.find_spec(top)
    except (ImportError, ValueError):
        return []
    if spec is None:
        return []
    if spec.submodule_search_locations:  # a package (or namespace package): its folders
        return [Path(p).resolve() for p in spec.submodule_search_locations]
    if spec.origin and spec.has_location:  # a single module: the folder holding it
        return [Path(spec.origin).resolve().parent]
    return []
