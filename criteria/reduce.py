"""Bounded reduction of evidence values (SPEC §8): pure and deterministic.

* A short string is kept verbatim.
* A long string keeps fixed head and tail fragments plus at most
  :data:`MAX_WINDOWS` keyword-centred windows; keywords are the selector's
  ``match`` terms first, then the common reduction markers
  (:data:`REDUCTION_MARKERS`), so a harness's "... 40000 bytes truncated ..."
  notice survives even when it sits in the middle of megabytes of output.
* A long collection (a tool catalogue, a message list) keeps every entry that
  matches a selector keyword in full and replaces the rest with one explicit
  reduction record naming what was left out.

Work per string is one lower-casing and a ``find``/``rfind`` per keyword, so
multi-megabyte inputs stay fast.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

#: Markers of reduction or failure that get a window whenever they occur in a long string.
REDUCTION_MARKERS: tuple[str, ...] = (
    "truncated", "omitted", "exit code", "exit status", "error", "timed out", "killed",
)
#: Global bounds (fixed per source revision; a rubric cannot raise them).
MAX_WINDOWS = 4
MIN_STRING_LIMIT = 48
MAX_STRING_LIMIT = 4000
MAX_DEPTH = 12
MAX_OMITTED_NAMES = 100


@dataclass(frozen=True)
class Budget:
    """Reduction limits for one pass over a packet's records."""

    string_limit: int
    list_limit: int
    max_windows: int = MAX_WINDOWS

    @property
    def fragment(self) -> int:
        """Head and tail fragment length of a reduced string."""
        return max(16, self.string_limit // 4)

    @property
    def radius(self) -> int:
        """Characters kept on each side of a keyword hit."""
        return max(16, self.string_limit // 8)

    def halved(self) -> Budget:
        return Budget(max(MIN_STRING_LIMIT, self.string_limit // 2), max(2, self.list_limit // 2), self.max_windows)


@dataclass
class Reducer:
    """Reduces values against fixed keywords; remembers keyword hits per string.

    Attributes:
        match: the selector's keywords (decide which collection entries are kept).
        keywords: ``match`` then the reduction markers (decide string windows).
    """

    match: tuple[str, ...]
    keywords: tuple[str, ...] = ()
    strings_reduced: int = 0
    collections_reduced: int = 0
    _hits: dict[int, tuple[str, tuple[tuple[int, str], ...]]] = field(default_factory=dict, repr=False)

    def __post_init__(self) -> None:
        if not self.keywords:
            seen: dict[str, None] = {}
            for k in (*self.match, *REDUCTION_MARKERS):
                if k and k.lower() not in {s.lower() for s in seen}:
                    seen[k] = None
            self.keywords = tuple(seen)

    def reset_counts(self) -> None:
        self.strings_reduced = 0
        self.collections_reduced = 0

    # ------------------------------------------------------------------ strings

    def hits(self, text: str) -> tuple[tuple[int, str], ...]:
        """First and last occurrence of every keyword, in keyword priority order."""
        cached = self._hits.get(id(text))
        if cached is not None and cached[0] is text:
            return cached[1]
        out: list[tuple[int, str]] = []
        low = text.lower()
        if len(low) == len(text):
            for kw in self.keywords:
                k = kw.lower()
                first = low.find(k)
                if first < 0:
                    continue
                out.append((first, kw))
                last = low.rfind(k)
                if last != first:
                    out.append((last, kw))
        else:  # lower-casing changed offsets (rare scripts): use case-insensitive regex
            for kw in self.keywords:
                found = [m.start() for m in re.finditer(re.escape(kw), text, re.IGNORECASE)]
                if found:
                    out.append((found[0], kw))
                    if found[-1] != found[0]:
                        out.append((found[-1], kw))
        result = tuple(out)
        self._hits[id(text)] = (text, result)
        return result

    def reduce_string(self, text: str, budget: Budget) -> str | dict[str, Any]:
        if len(text) <= budget.string_limit:
            return text
        self.strings_reduced += 1
        n, frag, radius = len(text), budget.fragment, budget.radius
        kept: list[tuple[int, int]] = [(0, frag), (n - frag, n)]
        windows: list[dict[str, Any]] = []
        for pos, kw in self.hits(text):
            if len(windows) >= budget.max_windows:
                break
            if any(a <= pos and pos + len(kw) <= b for a, b in kept):
                continue  # already visible in a fragment or an earlier window
            start, end = max(0, pos - radius), min(n, pos + len(kw) + radius)
            kept.append((start, end))
            windows.append({"at": start, "keyword": kw, "text": text[start:end]})
        windows.sort(key=lambda w: int(w["at"]))
        return {
            "reduced_text": True,
            "length": n,
            "head": text[:frag],
            "windows": windows,
            "tail": text[n - frag:],
            "omitted_chars": n - _covered(kept),
        }

    # -------------------------------------------------------------- collections

    def matched_keywords(self, value: Any) -> list[str]:
        """The selector keywords (case-insensitive) found in any text leaf of ``value``."""
        if not self.match:
            return []
        lows = [leaf.lower() for leaf in _leaves(value)]
        return [kw for kw in self.match if any(kw.lower() in low for low in lows)]

    def reduce(self, value: Any, budget: Budget, depth: int = 0) -> Any:
        if isinstance(value, str):
            return self.reduce_string(value, budget)
        if depth >= MAX_DEPTH and isinstance(value, (dict, list)):
            return self.reduce_string(json.dumps(value, sort_keys=True, ensure_ascii=False), budget)
        if isinstance(value, dict):
            return {k: self.reduce(v, budget, depth + 1) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            if len(value) <= budget.list_limit:
                return [self.reduce(v, budget, depth + 1) for v in value]
            return self._reduce_list(list(value), budget, depth)
        return value

    def _reduce_list(self, items: list[Any], budget: Budget, depth: int) -> list[Any]:
        self.collections_reduced += 1
        limit = budget.list_limit
        if self.match:
            keep = [i for i, item in enumerate(items) if self.matched_keywords(item)][:limit]
        else:
            head = (limit + 1) // 2
            keep = list(range(head)) + list(range(len(items) - (limit - head), len(items)))
        kept = set(keep)
        omitted = [i for i in range(len(items)) if i not in kept]
        names = [str(items[i]["name"])[:80] for i in omitted
                 if isinstance(items[i], dict) and isinstance(items[i].get("name"), str)]
        record: dict[str, Any] = {
            "reduced_collection": True,
            "total": len(items),
            "kept_indices": keep,
            "omitted": len(omitted),
        }
        if names:
            record["omitted_names"] = names[:MAX_OMITTED_NAMES]
            if len(names) > MAX_OMITTED_NAMES:
                record["omitted_names_more"] = len(names) - MAX_OMITTED_NAMES
        return [*(self.reduce(items[i], budget, depth + 1) for i in keep), record]


def _covered(intervals: list[tuple[int, int]]) -> int:
    total, end = 0, -1
    for a, b in sorted(intervals):
        if b <= end:
            continue
        total += b - max(a, end)
        end = b
    return total


def _leaves(value: Any) -> list[str]:
    stack, out = [value], []
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            out.append(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, (list, tuple)):
            stack.extend(item)
        elif item is not None and not isinstance(item, bool):
            out.append(str(item))
    return out
