"""Where a benchmark leaves its figures (``bench/results/NAME.md``, and ``NAME.json`` when it has data), and
the one way every benchmark states how its cost grows with size (:func:`growth_exponent`)."""

from __future__ import annotations

import json
import math
import statistics
import subprocess
import time
from collections.abc import Callable, Iterable
from datetime import datetime, timezone
from pathlib import Path
from typing import TypeVar

RESULTS_DIR = Path(__file__).resolve().parent / "results"
REPO = Path(__file__).resolve().parent.parent
#: How the last line of every written .md begins: when and at which commit it was written (:func:`stamp`).
STAMP_PREFIX = "Written "
T = TypeVar("T")


def stamp(now: datetime | None = None, repo: Path = REPO) -> str:
    """When (UTC) and at which commit results are written: ``git rev-parse --short HEAD``, ``+dirty`` when a
    tracked file outside ``bench/results`` differs from it (results being rewritten do not make a run dirty).
    Without git or a repository the commit reads ``unknown``."""
    when = (now or datetime.now(timezone.utc)).strftime("%Y-%m-%d %H:%M UTC")

    def git(*args: str) -> str:
        return subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True,
                              timeout=30).stdout.strip()

    try:
        commit = git("rev-parse", "--short", "HEAD")
        changed = git("status", "--porcelain", "--untracked-files=no", "--", ".", ":(exclude)bench/results")
    except (OSError, subprocess.SubprocessError):
        return f"{STAMP_PREFIX}{when} at commit unknown (no git repository)."
    return f"{STAMP_PREFIX}{when} at commit {commit}{'+dirty' if changed else ''}."


def without_stamp(text: str) -> str:
    """A written .md without its stamp line (what the bench rendered), for comparing with a fresh render."""
    head, sep, last = text.rstrip("\n").rpartition("\n\n")
    stamped = sep and last.startswith(STAMP_PREFIX) and " UTC at commit " in last and "\n" not in last
    return head + "\n" if stamped else text


def write_results(name: str, text: str, data: object | None = None, indent: int = 2) -> Path:
    """Write the Markdown ``text`` (and ``data`` as JSON) of benchmark ``name``; returns the .md path. The
    .md ends with a :func:`stamp` line, so a dated figure quoted elsewhere can be traced to its commit."""
    RESULTS_DIR.mkdir(parents=True, exist_ok=True)
    if data is not None:
        (RESULTS_DIR / f"{name}.json").write_text(json.dumps(data, indent=indent) + "\n", encoding="utf-8")
    path = RESULTS_DIR / f"{name}.md"
    path.write_text(text + ("" if text.endswith("\n") else "\n") + "\n" + stamp() + "\n", encoding="utf-8")
    return path


def target_lines(targets: dict[str, bool | None]) -> list[str]:
    """One line per target: met, NOT met, or not measured (``None``, a size this run left out)."""
    words = {True: "met", False: "NOT met", None: "not measured in this run"}
    return [f"target {target}: {words[ok]}" for target, ok in targets.items()]


def report_targets(targets: dict[str, bool | None]) -> int:
    """Print :func:`target_lines` and return the bench's exit status: 1 when any target was missed, else 0."""
    for line in target_lines(targets):
        print(line)
    return 1 if any(ok is False for ok in targets.values()) else 0


def exponent_text(b: float | None) -> str:
    """A growth exponent (or any ratio) as printed in the results: two decimals, "n/a" when unknown."""
    return "n/a" if b is None else f"{b:.2f}"


def growth_exponent(points: Iterable[tuple[float, float]]) -> float | None:
    """Exponent b of ``cost ~ size^b`` (least squares in log-log space) over ``(size, cost)`` points with
    both positive: 1 = linear, 2 = quadratic, 0 = flat. None with fewer than two usable points."""
    pts = [(math.log(x), math.log(y)) for x, y in points if x and x > 0 and y and y > 0]
    if len(pts) < 2:
        return None
    mx = sum(x for x, _ in pts) / len(pts)
    my = sum(y for _, y in pts) / len(pts)
    den = sum((x - mx) ** 2 for x, _ in pts)
    return sum((x - mx) * (y - my) for x, y in pts) / den if den else None


def growth_exponents(points: Iterable[tuple[float, float]], from_size: float) -> tuple[float | None, float | None]:
    """:func:`growth_exponent` over all ``(size, cost)`` points, and over those from ``from_size`` on (past a
    fixed cost that flattens the small sizes)."""
    points = list(points)
    return growth_exponent(points), growth_exponent((x, y) for x, y in points if x >= from_size)


def timed(fn: Callable[[], T], clock: Callable[[], float] = time.process_time) -> tuple[T, float]:
    """``fn()`` and the seconds it took on ``clock`` (default CPU time: the work itself, whatever else runs;
    ``time.perf_counter`` for wall time)."""
    t0 = clock()
    result = fn()
    return result, clock() - t0


def run_seconds(fn: Callable[[], object], repeats: int, clock: Callable[[], float] = time.process_time
                ) -> list[float]:
    """Seconds of each of ``repeats`` calls of ``fn`` on ``clock`` (as :func:`timed`)."""
    return [timed(fn, clock)[1] for _ in range(repeats)]


def cpu_seconds(fn: Callable[[], object], repeats: int) -> float:
    """Median CPU seconds of ``repeats`` calls of ``fn``."""
    return statistics.median(run_seconds(fn, repeats))
