"""TraceTrial kernel: the domain and nothing else.

Trace IR and its read/write, task packs, the run-archive layout, manifest and redaction,
result and score records, the taxonomy, harness capabilities, and the two APIs task packs
import: the probe-policy API (:mod:`tracetrial.policy`) and the verifier API
(:mod:`tracetrial.verify`). It imports no other package of the repository; every other
layer (``apparatus``, ``harnesses``, ``criteria``, ``reports``, ``ci``, the plugin
``tracetrial_fixtures`` and the command ``tracetrial_cli``) imports from here. The rule is
an import-linter contract run by the test suite.
"""

from __future__ import annotations

__version__ = "0.1.0"

__all__ = ["__version__"]
