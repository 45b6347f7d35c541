"""The kernel's truncation-notice parser (``tracetrial.notices``): every wording harnesses use,
and a stated size checked against the real output — accurate within 10 %, a halved omitted
size (the ``misreport_omitted`` defect) caught, an omission no notice covers caught."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from tracetrial.notices import check_sizes, size_statements

REAL = "".join(f"row {i:05d} payload-{i * 7919 % 100000:05d} checksum ok\n" for i in range(4000))


def _cut(head: int, tail: int, notice: str) -> str:
    return REAL[:head] + notice + REAL[len(REAL) - tail:]


def test_wordings() -> None:
    found = {(s["kind"], s["value"], s["unit"]) for s in size_statements(
        "[154427 bytes omitted] … omitted 120 of 1762 lines … Output too large (166.8KB) … "
        "Original token count: 42703 … Total output lines: 1762 … File content (1 MB) exceeds")}
    assert found >= {("omitted", 154427, "bytes"), ("omitted", 120, "lines"), ("total", 1762, "lines"),
                     ("total", 166.8 * 1024, "bytes"), ("total", 42703, "tokens"), ("total", 1024 * 1024, "bytes")}
    assert size_statements("no notice here") == []


def test_openclaw_more_characters_wording() -> None:
    # OpenClaw 2026.9.6 ends a cut exec result with this notice (C1-ticket-export-001, real cell)
    notice = "…08470513[... 36060 more characters truncated; rerun with narrower args if needed]"
    assert [(s["kind"], s["value"], s["unit"]) for s in size_statements(notice)] == [("omitted", 36060, "bytes")]


def test_one_statement_matched_by_two_wordings_counts_once() -> None:
    assert len(size_statements("[truncated 1200 lines]")) == 1


@settings(max_examples=20, deadline=None)
@given(head=st.integers(2000, 60000), tail=st.integers(2000, 60000))
def test_an_accurate_notice_passes_and_a_halved_one_fails(head: int, tail: int) -> None:
    omitted = len(REAL) - head - tail
    assert check_sizes(_cut(head, tail, f"\n[{omitted} bytes omitted]\n"), REAL)[0]
    ok, notes = check_sizes(_cut(head, tail, f"\n[{omitted // 2} bytes omitted]\n"), REAL)
    assert not ok and any("OFF" in n for n in notes)


def test_an_omission_no_notice_covers_fails_without_a_total() -> None:
    # one honest notice for the gap it marks; the rest of the output cut off silently
    first = REAL[:5000] + "\n[10000 bytes omitted]\n" + REAL[15000:40000]
    ok, notes = check_sizes(first, REAL)
    assert not ok and "covered by no notice" in notes[-1]


def test_a_result_without_statements_passes() -> None:
    assert check_sizes(REAL[:100] + "\n[output truncated]\n", REAL) == (True, [])


def test_openclaw_long_line_refusal_states_the_lines_size() -> None:
    """OpenClaw 2026.6.9's ``read`` refuses a one-line dump (C1-sensor-dump-003, real cell): the
    line's size is the dump's size; 408.1 KB against the real 418,130 bytes is within 10 %."""
    notice = ("[Line 1 is 408.1KB, exceeds 50.0KB limit. Use bash: sed -n '1p' /w/batch.json | head -c 51200]")
    [stmt] = size_statements(notice)
    assert (stmt["kind"], stmt["value"], stmt["unit"], stmt.get("line")) == ("line", 408.1 * 1024, "bytes", 1)
    one_line = "x" * 418129 + "\n"
    ok, notes = check_sizes(notice, one_line)
    assert ok and notes == ["line 417894 bytes vs real 418129 (ok)"]
    assert not check_sizes(notice.replace("408.1KB", "204.0KB"), one_line)[0]  # halved: OFF
    # line N of a longer output is that line's size, not the output's: no total is stated then
    many = "short\n" + "y" * 417894 + "\n" + REAL
    ok, notes = check_sizes(notice.replace("Line 1", "Line 2"), many)
    assert notes[0] == "line 417894 bytes vs real 417894 (ok)" and not ok and "covered by no notice" in notes[-1]
