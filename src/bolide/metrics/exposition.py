"""Prometheus' text exposition format (version 0.0.4): metric families to the text a scrape
gets. Pure functions; the samples come from the broker's (:mod:`bolide.broker.metrics.collect`)
and the controller's (:mod:`bolide.controller.metrics`) collections."""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"

Labels = tuple[tuple[str, str], ...]


@dataclass(slots=True)
class Family:
    """One metric: ``kind`` counter, gauge or histogram; ``samples`` (labels, value). A
    histogram's samples are (labels, :class:`HistogramValue`)."""

    name: str
    kind: str
    help: str
    samples: list[tuple[Labels, float | HistogramValue]] = field(default_factory=list)

    def add(self, labels: Labels, value: float | HistogramValue) -> None:
        self.samples.append((labels, value))


@dataclass(slots=True)
class HistogramValue:
    """Cumulative counts per upper bound (``bounds`` ascending, +Inf implied), sum and count."""

    bounds: Sequence[float]
    counts: Sequence[int]  # observations <= each bound, then the total
    total: float


def escape(value: str) -> str:
    """A label value as the format writes it (backslash, quote and newline escaped)."""
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


def number(value: float) -> str:
    if isinstance(value, int) or (isinstance(value, float) and value.is_integer() and abs(value) < 2**53):
        return str(int(value))
    if math.isnan(value):
        return "NaN"
    if math.isinf(value):
        return "+Inf" if value > 0 else "-Inf"
    return repr(float(value))


def _labels(labels: Labels) -> str:
    if not labels:
        return ""
    return "{" + ",".join(f'{k}="{escape(v)}"' for k, v in labels) + "}"


def render(families: Iterable[Family]) -> str:
    """The exposition text of ``families`` (families without samples are left out)."""
    lines: list[str] = []
    for family in families:
        if not family.samples:
            continue
        help_text = family.help.replace("\\", "\\\\").replace("\n", "\\n")
        lines.append(f"# HELP {family.name} {help_text}")
        lines.append(f"# TYPE {family.name} {family.kind}")
        for labels, value in family.samples:
            if isinstance(value, HistogramValue):
                lines.extend(_histogram(family.name, labels, value))
            else:
                lines.append(f"{family.name}{_labels(labels)} {number(value)}")
    return "\n".join(lines) + "\n"


def _histogram(name: str, labels: Labels, value: HistogramValue) -> list[str]:
    out = []
    for bound, count in zip([*value.bounds, math.inf], value.counts, strict=True):
        le = "+Inf" if math.isinf(bound) else repr(float(bound))
        out.append(f"{name}_bucket{_labels((*labels, ('le', le)))} {count}")
    out.append(f"{name}_sum{_labels(labels)} {number(value.total)}")
    out.append(f"{name}_count{_labels(labels)} {value.counts[-1]}")
    return out
