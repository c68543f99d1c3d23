"""Prometheus metrics shared by the broker and the controller: the text exposition format, the
HTTP endpoint serving it, and RocketMQ's exporter settings (``metricsExporterType``,
``metricsPromExporterHost``/``Port``, ``metricsLabel``)."""
