"""The ``tracetrial`` command: the composition root, the one place that may import every layer
(kernel, apparatus, harnesses, criteria, reports, ci). Nothing imports it."""
