"""Offline pipeline jobs on Spark behind ``bolide pipeline``: archive to Parquet, lag report,
and rebuilding a store's ConsumeQueue and index files. Each job is a function taking a
SparkSession, so it runs on ``local[*]`` or under ``spark-submit`` alike."""
