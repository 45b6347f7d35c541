"""The archive's redactor on raw JSON/JSONL text: a credential assignment is masked and nothing
after it is eaten (an escaped newline ends the value; an escaped backslash does not)."""

from __future__ import annotations

import json

from tracetrial.redact import Redactor


def test_assignment_in_raw_json_keeps_the_text_after_the_escaped_newline() -> None:
    record = json.dumps({"content": "TT_DEPLOY_TOKEN=ttk_live_9f8e7d6c5b4a\n==> uploading 14 assets"})
    out = Redactor(set()).text(record)
    assert "ttk_live_9f8e7d6c5b4a" not in out
    assert json.loads(out)["content"].endswith("\n==> uploading 14 assets")


def test_an_escaped_backslash_stays_inside_the_masked_value() -> None:
    record = json.dumps({"content": "DB_PASSWORD=abc\\defghijk rest"})
    out = Redactor(set()).text(record)
    assert "defghijk" not in out and json.loads(out)["content"].endswith(" rest")
