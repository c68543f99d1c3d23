"""RocketMQ's metrics exporter settings, as brokers and controllers read them:
``metricsExporterType`` (DISABLE, OTLP_GRPC, PROM, LOG or their ordinals 0-3; Bolide serves
PROM), ``metricsPromExporterPort`` and ``metricsLabel`` (``k1:v1,k2:v2``, more labels on every
series)."""

from __future__ import annotations

import logging

from bolide.errors import ConfigError

log = logging.getLogger(__name__)

EXPORTERS = ("DISABLE", "OTLP_GRPC", "PROM", "LOG")
DEFAULT_PROM_PORT = 5557


def exporter_name(value: str) -> str:
    """metricsExporterType by name (RocketMQ takes its ordinal too)."""
    text = value.strip().upper()
    return EXPORTERS[int(text)] if text.isdecimal() and int(text) < len(EXPORTERS) else text


def parse_labels(text: str) -> dict[str, str]:
    """metricsLabel's pairs."""
    return dict(pair.split(":", 1) for pair in text.split(",") if pair)


def check(exporter_type: str, prom_port: int, labels: str) -> None:
    """ConfigError naming the fix when a setting is not one RocketMQ takes."""
    if exporter_name(exporter_type) not in EXPORTERS:
        raise ConfigError(f"metricsExporterType={exporter_type} is none of DISABLE, PROM, OTLP_GRPC, LOG "
                          "(or 0 to 3)")
    if not 0 <= prom_port <= 65535:
        raise ConfigError(f"metricsPromExporterPort={prom_port} is out of range; use 0 to 65535 "
                          f"(RocketMQ uses {DEFAULT_PROM_PORT})")
    for pair in filter(None, labels.split(",")):
        if pair.count(":") != 1 or not all(pair.split(":")):
            raise ConfigError(f"metricsLabel pair {pair!r} is not key:value; write metricsLabel=k1:v1,k2:v2")


def serves_prometheus(exporter_type: str, prom_port: int) -> bool:
    """Whether to serve Prometheus' text (PROM); the exporters not offered are logged."""
    exporter = exporter_name(exporter_type)
    if exporter in ("OTLP_GRPC", "LOG"):
        log.warning("metricsExporterType=%s is not offered: set PROM to serve Prometheus' text on "
                    "metricsPromExporterPort (%d)", exporter, prom_port)
    return exporter == "PROM"
