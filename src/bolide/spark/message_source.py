"""What the ``rocketmq`` and ``rocketmq-store`` data sources share: a name and the columns of a
message (:data:`~bolide.spark.schema.SCHEMA_DDL`)."""

from __future__ import annotations

from typing import ClassVar

from pyspark.sql.datasource import DataSource
from pyspark.sql.types import StructType

from bolide.spark.schema import spark_schema


class MessageSource(DataSource):
    """A data source of messages, named ``FORMAT`` in ``spark.read.format(...)``."""

    FORMAT: ClassVar[str]

    @classmethod
    def name(cls) -> str:
        return cls.FORMAT

    def schema(self) -> StructType:
        return spark_schema()
