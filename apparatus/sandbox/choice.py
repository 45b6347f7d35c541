"""Which backend confines a cell: the one place that decides what ``--tt-sandbox`` means.

:func:`choose_backend` takes what was asked for (``auto`` | ``docker`` | ``bwrap`` |
``local``), the task's network mode and whether the harness can be confined at all,
probes what runs on this machine, and returns a backend name — or raises
:class:`SandboxUnavailable` with the reason and the install hint. The plugin turns that
into the cell's skip, the session header prints what ``auto`` resolved to, and
:func:`apparatus.sandbox.resolve_sandbox` builds the backend from it.
"""

from __future__ import annotations

from collections.abc import Callable

from apparatus.sandbox import BWRAP_INSTALL, BwrapSandbox
from apparatus.sandbox.docker_backend import DOCKER_INSTALL, docker_reason

__all__ = ["PREFERENCE", "PROBES", "SandboxUnavailable", "choose_backend"]

#: Why each confining backend cannot run here (``None``: it runs). Both are cached per
#: process by the backends, so asking per cell costs nothing after the first.
PROBES: dict[str, Callable[[], str | None]] = {"docker": docker_reason,
                                                "bwrap": lambda: BwrapSandbox().available()}
#: How to install each confining backend.
INSTALLS = {"docker": DOCKER_INSTALL, "bwrap": BWRAP_INSTALL}
#: ``auto``'s order of preference: the paper's setup first.
PREFERENCE = ("docker", "bwrap")


class SandboxUnavailable(RuntimeError):
    """No backend can confine the cell as asked. The message is the whole story (what was
    asked, why not); :attr:`reason` is the why alone and :attr:`install` how to fix it, when
    installing something would."""

    def __init__(self, message: str, *, reason: str, install: str | None = None):
        super().__init__(message)
        self.reason = reason
        self.install = install


def choose_backend(requested: str, *, network: str = "loopback", harness: str = "the harness",
                   unconfinable: str | None = None) -> str:
    """``--tt-sandbox`` -> the backend a cell uses (``local`` | ``bwrap`` | ``docker``).

    Args:
        requested: ``auto``, ``docker``, ``bwrap`` or ``local``.
        network: the task's ``isolation.yaml`` network mode; ``none`` needs bwrap or docker,
            since the local backend cannot take the network away.
        harness: the harness's name, for the messages.
        unconfinable: why no sandbox can wrap this harness (it starts its processes
            without :func:`harnesses.runner.run_process` or ``Confinement.wrap``); ``None``
            for every confinable harness, which every built-in one is.

    ``auto`` is docker when its probe passes, else bwrap when it runs, else local — and
    local for an unconfinable harness. An explicit docker or bwrap is used when it runs
    here and the harness is confinable.

    Raises:
        SandboxUnavailable: an explicit backend does not run here, an unconfinable harness
            was asked to run in one, or a ``network: none`` task would end up on local.
        ValueError: ``requested`` is no backend name.
    """
    if requested in PROBES:
        reason = PROBES[requested]()
        if reason:
            raise SandboxUnavailable(f"sandbox backend {requested!r} unavailable: {reason} "
                                     f"(install: {INSTALLS[requested]})", reason=reason, install=INSTALLS[requested])
        if unconfinable is not None:
            raise SandboxUnavailable(f"sandbox backend {requested!r} unsupported for {harness}: {unconfinable}",
                                     reason=unconfinable)
        return requested
    if requested not in ("auto", "local"):
        raise ValueError(f"unknown sandbox backend {requested!r}; use auto|docker|bwrap|local")
    chosen = "local"
    if requested == "auto" and unconfinable is None:
        chosen = next((name for name in PREFERENCE if PROBES[name]() is None), "local")
    if chosen == "local" and network == "none":
        install: str | None = None
        if requested == "local":
            why = "--tt-sandbox local was asked for"
        elif unconfinable is not None:
            why = unconfinable
        else:
            why = "neither docker nor bwrap runs here"
            install = " or ".join(INSTALLS[name] for name in PREFERENCE)
        raise SandboxUnavailable(f"task needs network: none, which the local sandbox cannot provide ({why})",
                                 reason=why, install=install)
    return chosen
