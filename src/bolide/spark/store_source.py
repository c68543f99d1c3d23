"""``spark.read.format("rocketmq-store")``: the data source class, which Spark imports wherever it
looks the source up or builds it; planning and reading are in :mod:`bolide.spark.store_reader`,
imported only where they run."""

from __future__ import annotations

from pyspark.sql.datasource import DataSource, DataSourceReader
from pyspark.sql.types import StructType

from bolide.spark.schema import projection, spark_schema

FORMAT = "rocketmq-store"


class RocketMQStoreDataSource(DataSource):
    """``spark.read.format("rocketmq-store").load(store_dir)``."""

    @classmethod
    def name(cls) -> str:
        return FORMAT

    def schema(self) -> StructType:
        return spark_schema()

    def reader(self, schema: StructType) -> DataSourceReader:
        from bolide.spark.store_reader import StoreBatchReader, store_options

        return StoreBatchReader(store_options(self.options), projection(schema))
