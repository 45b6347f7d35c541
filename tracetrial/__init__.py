"""TraceTrial kernel: Trace IR, task packs, run archive and the probe-policy API.

Every other package (``harnesses``, ``criteria``, ``reports``, ``ci`` and the
pytest plugin ``tracetrial_fixtures``) imports from here; this package imports
none of them.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
