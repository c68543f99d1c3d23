"""Found by Spark's data source lookup (it imports top-level ``pyspark_*`` modules and
registers their ``DefaultSource``): makes ``format("rocketmq")`` work without registering."""

from bolide.spark.source import RocketMQDataSource as DefaultSource

__all__ = ["DefaultSource"]
