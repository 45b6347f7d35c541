"""Repo-root conftest. The TraceTrial plugin itself is loaded through its ``pytest11``
entry point (``pip install -e .``); nothing else lives here."""
