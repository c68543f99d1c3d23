"""Bolide on Apache Spark: the PySpark data source ``rocketmq`` (batch and streaming reads,
batch and streaming writes) on top of the public client. Guide: docs/pipeline.md.

Installing the ``spark`` extra makes ``spark.read.format("rocketmq")`` work by itself (Spark
finds the ``pyspark_bolide`` package); :func:`register` does it for a session explicitly.
Importing this package imports no Spark module.
"""

from __future__ import annotations

from typing import Any

FORMAT = "rocketmq"


def register(spark: Any) -> None:
    """Register the ``rocketmq`` and ``rocketmq-store`` data sources with the SparkSession ``spark``."""
    from bolide.spark.source import RocketMQDataSource
    from bolide.spark.store_source import RocketMQStoreDataSource

    spark.dataSource.register(RocketMQDataSource)
    spark.dataSource.register(RocketMQStoreDataSource)


__all__ = ["FORMAT", "register"]
