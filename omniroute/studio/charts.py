"""The Activity view's charts, drawn on the server as SVG: each series a polyline over the
window's steps, with a few axis ticks, and the numbers behind them for a table."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from datetime import UTC, datetime

from omniroute.core.activity import COUNTS, WINDOWS, Step

WIDTH, HEIGHT = 640, 180
LEFT, RIGHT, TOP, BOTTOM = 52, 8, 8, 22
X_TICKS = 6
Y_TICKS = 5


@dataclass
class Series:
    label: str
    values: list[float | None]
    css: str  # the stroke's class: series-0, series-1
    segments: list[str] = field(default_factory=list)  # "x,y x,y ..." runs without gaps
    dots: list[tuple[float, float]] = field(default_factory=list)  # a run of one point


@dataclass
class Chart:
    id: str
    title: str
    unit: str
    series: list[Series]
    x_ticks: list[tuple[float, str]]
    y_ticks: list[tuple[float, str]]
    labels: list[str]  # each step's time, for the table
    width: int = WIDTH
    height: int = HEIGHT
    left: int = LEFT
    bottom: float = HEIGHT - BOTTOM

    @property
    def empty(self) -> bool:
        return not any(value for series in self.series for value in series.values if value)


def _nice_ceiling(value: float) -> float:
    """1, 2 or 5 times a power of ten, at least `value` (an axis' top)."""
    if value <= 0:
        return 1.0
    power = 10 ** math.floor(math.log10(value))
    return next(f * power for f in (1, 2, 5, 10) if f * power >= value)


def _number(value: float) -> str:
    return f"{value:,.0f}" if value >= 10 or value == int(value) else f"{value:.1f}"


def chart(
    id: str,
    title: str,
    unit: str,
    steps: list[Step],
    lines: dict[str, list[float | None]],
    stamp: str = "%H:%M",
) -> Chart:
    top = _nice_ceiling(max((v for vs in lines.values() for v in vs if v), default=0))
    plot_w, plot_h = WIDTH - LEFT - RIGHT, HEIGHT - TOP - BOTTOM
    count = max(1, len(steps) - 1)

    def x(index: int) -> float:
        return round(LEFT + plot_w * index / count, 1)

    def y(value: float) -> float:
        return round(TOP + plot_h * (1 - value / top), 1)

    series = []
    for number, (label, values) in enumerate(lines.items()):
        line = Series(label, values, f"series-{number}")
        run: list[tuple[float, float]] = []
        for index, value in enumerate([*values, None]):
            if value is not None:
                run.append((x(index), y(value)))
                continue
            if len(run) == 1:
                line.dots.append(run[0])
            elif run:
                line.segments.append(" ".join(f"{px},{py}" for px, py in run))
            run = []
        series.append(line)
    stamps = [datetime.fromtimestamp(step.start, UTC).strftime(stamp) for step in steps]
    every = max(1, len(steps) // X_TICKS)
    return Chart(
        id=id,
        title=title,
        unit=unit,
        series=series,
        x_ticks=[(x(i), stamps[i]) for i in range(0, len(steps), every)],
        y_ticks=[(y(top * n / Y_TICKS), _number(top * n / Y_TICKS)) for n in range(Y_TICKS + 1)],
        labels=stamps,
    )


def activity_charts(steps: list[Step], window: str) -> list[Chart]:
    """The view's five charts over a window's steps (a week's are labelled with the day)."""
    stamp = "%a %H:%M" if window == "week" else "%H:%M"

    def totals(name: str) -> list[float | None]:
        return [step.totals.get(name, 0.0) for step in steps]

    def percentile(q: float) -> list[float | None]:
        return [step.latency_percentile(q) for step in steps]

    step_seconds = WINDOWS[window][1] * 60
    open_streams = [total / step_seconds for total in totals("stream_seconds")]

    specs = [
        ("chats", "Chats through the gateway", "requests", {"chats": totals("chats")}),
        (
            "memory",
            "Memories injected and facts extracted",
            "count",
            {"memories injected": totals("injected"), "facts extracted": totals("facts")},
        ),
        (
            "streams",
            "Open streams (average) and chats refused at the limit",
            "count",
            {"open streams": open_streams, "refused": totals("rejected")},
        ),
        (
            "latency",
            "Retrieval latency",
            "ms",
            {"median": percentile(0.5), "95th percentile": percentile(0.95)},
        ),
        (
            "tokens",
            "Tokens added to prompts and saved by summaries",
            "tokens",
            {"added by memory": totals("tokens_added"), "saved": totals("tokens_saved")},
        ),
    ]
    return [chart(id, title, unit, steps, lines, stamp) for id, title, unit, lines in specs]


def window_totals(steps: list[Step]) -> dict[str, float | None]:
    """The window's sums of each count, and its retrieval p50/p95 over every step."""
    merged = Step(0, {})
    for step in steps:
        for name, value in step.totals.items():
            merged.totals[name] = merged.totals.get(name, 0.0) + value
    sums: dict[str, float | None] = {name: merged.totals.get(name, 0.0) for name in COUNTS}
    sums["p50"] = merged.latency_percentile(0.5)
    sums["p95"] = merged.latency_percentile(0.95)
    return sums
