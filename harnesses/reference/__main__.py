"""``python -m harnesses.reference``: run one user turn of the reference harness."""

from harnesses.reference.cli import main

raise SystemExit(main())
