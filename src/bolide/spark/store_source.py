"""``spark.read.format("rocketmq-store")``: the data source class, which Spark imports wherever it
looks the source up or builds it; planning and reading are in :mod:`bolide.spark.store_reader`,
imported only where they run."""

from __future__ import annotations

from pyspark.sql.datasource import DataSourceReader
from pyspark.sql.types import StructType

from bolide.spark.message_source import MessageSource
from bolide.spark.schema import projection

FORMAT = "rocketmq-store"


class RocketMQStoreDataSource(MessageSource):
    """``spark.read.format("rocketmq-store").load(store_dir)``."""

    FORMAT = FORMAT

    def reader(self, schema: StructType) -> DataSourceReader:
        from bolide.spark.store_reader import StoreBatchReader, store_options

        return StoreBatchReader(store_options(self.options), projection(schema))
