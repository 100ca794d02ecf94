"""Where a benchmark leaves its figures: ``bench/results/NAME.md``, and ``NAME.json`` when it has data."""

from __future__ import annotations

import json
from pathlib import Path

RESULTS_DIR = Path(__file__).resolve().parent / "results"


def write_results(name: str, text: str, data: object | None = None, indent: int = 2) -> Path:
    """Write the Markdown ``text`` (and ``data`` as JSON) of benchmark ``name``; returns the .md path."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    if data is not None:
        (RESULTS_DIR / f"{name}.json").write_text(json.dumps(data, indent=indent) + "\n", encoding="utf-8")
    path = RESULTS_DIR / f"{name}.md"
    path.write_text(text, encoding="utf-8")
    return path
