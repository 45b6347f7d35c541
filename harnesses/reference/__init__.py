"""The reference harness: a minimal, faithful agent harness of our own, and its mutants.

It exists to calibrate the benchmark (DESIGN.md §4 "Reference harness"): every
task must score 100/100 with it under the probe protocol, and each *mutant*
(``reference+<defect>``, see :mod:`harnesses.reference.mutants`) must fail
exactly the criteria that target its one seeded defect.

Modules::

    cli.py        ``python -m harnesses.reference``: flags, session start/resume, exit status
    agent.py      the agent loop (main principal, sub-agents, ask-user, completion record)
    chat.py       OpenAI Chat Completions client (streamed SSE with tool_calls deltas)
    tools.py      shell / read_file / write_file / edit_file, deny rules, truncation
    mcp_tools.py  stdio MCP servers through the official ``mcp`` SDK client
    records.py    native JSONL event log and session files (pydantic v2 records)
    mutants.py    the seeded defects and the property each one breaks
    normalize.py  pure normalizer: native JSONL -> Trace IR
    adapter.py    :class:`ReferenceAdapter`, registered as ``reference``
"""

from __future__ import annotations

__version__ = "0.1.0"
