"""Found by Spark's data source lookup like ``pyspark_bolide`` (one ``DefaultSource`` per
package): makes ``format("rocketmq-store")`` work without registering."""

from bolide.spark.store_source import RocketMQStoreDataSource as DefaultSource

__all__ = ["DefaultSource"]
