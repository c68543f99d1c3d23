"""The broker's metrics for Prometheus, under RocketMQ 5's names (``metricsExporterType=PROM``)."""
