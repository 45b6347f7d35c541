"""Render the harbour tiles from their SVG sources into dist/ (the current pipeline)."""

from pathlib import Path

SOURCES = Path(__file__).resolve().parents[1] / "assets" / "tiles" / "source"


def tiles():
    return sorted(p.stem for p in SOURCES.glob("*.svg"))


if __name__ == "__main__":
    print("\n".join(tiles()))
