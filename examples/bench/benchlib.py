"""Small helpers shared by the bench scripts: timing, a text table, a fresh KeSi.

The bench scripts are run by hand (`uv run examples/bench/NAME.py [--small]`),
never by pytest: timings depend on the machine and would make CI flaky.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent))
import checklib  # noqa: E402,F401  (puts kesi and mock_api on sys.path)
import kesi  # noqa: E402


def parse_args(description: str, extra=None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--small", action="store_true", help="a quick run with smaller sizes")
    if extra:
        extra(parser)
    return parser.parse_args()


def median_time(func, repeat: int = 3) -> tuple[float, object]:
    """Median wall time of func() over repeat runs, and its last result."""
    times, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = func()
        times.append(time.perf_counter() - started)
    return statistics.median(times), result


def quiet_kesi() -> None:
    """No UI output from KeSi while measuring."""
    kesi.UI = open(os.devnull, "w", encoding="utf-8")
    kesi.MAIN_AGENT.echo = False


def table(headers: list[str], rows: list[list]) -> str:
    cells = [[str(h) for h in headers]] + [[fmt(c) for c in row] for row in rows]
    widths = [max(len(row[i]) for row in cells) for i in range(len(headers))]
    lines = ["| " + " | ".join(c.ljust(w) for c, w in zip(row, widths)) + " |" for row in cells]
    lines.insert(1, "|" + "|".join("-" * (w + 2) for w in widths) + "|")
    return "\n".join(lines)


def fmt(value) -> str:
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, float):
        return f"{value:.3f}" if value < 100 else f"{value:.0f}"
    if isinstance(value, int):
        return f"{value:,}"
    return str(value)


def ms(seconds: float) -> float:
    return seconds * 1000
