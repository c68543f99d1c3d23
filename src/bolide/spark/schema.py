"""The columns of the ``rocketmq`` source, and messages turned into Arrow record batches.

Column names follow rocketmq-spark (``body``, ``queueId``, ``queueOffset``) and Kafka's source
conventions; a batch must have exactly the Arrow schema Spark derives from the DDL below
(same order, int32 vs int64, ``timestamp[us, UTC]``), so it is built from that schema.
"""

from __future__ import annotations

from collections.abc import Sequence
from functools import cache
from typing import TYPE_CHECKING

from bolide.common import properties as P
from bolide.common.message import MessageExt
from bolide.spark.options import SparkOptionError

if TYPE_CHECKING:
    import pyarrow as pa
    from pyspark.sql.types import StructType

SCHEMA_DDL = (
    "topic STRING, brokerName STRING, queueId INT, queueOffset BIGINT, commitLogOffset BIGINT, "
    "msgId STRING, keys STRING, tags STRING, body BINARY, properties MAP<STRING,STRING>, "
    "bornTimestamp TIMESTAMP, storeTimestamp TIMESTAMP, bornHost STRING, storeHost STRING, "
    "reconsumeTimes INT, sysFlag INT"
)
COLUMNS = tuple(part.split()[0] for part in SCHEMA_DDL.split(", "))


_TYPES = {"STRING": "StringType", "INT": "IntegerType", "BIGINT": "LongType", "BINARY": "BinaryType",
          "TIMESTAMP": "TimestampType"}


@cache
def spark_schema() -> StructType:
    """:data:`SCHEMA_DDL` as a StructType (parsing DDL would need a running JVM)."""
    from pyspark.sql import types as T

    fields = []
    for part in SCHEMA_DDL.split(", "):
        name, kind = part.split()
        data_type = (T.MapType(T.StringType(), T.StringType(), True) if kind.startswith("MAP")
                     else getattr(T, _TYPES[kind])())
        fields.append(T.StructField(name, data_type, True))
    return T.StructType(fields)


@cache
def arrow_schema() -> pa.Schema:
    """The Arrow schema Spark expects for :data:`SCHEMA_DDL` (built by pyspark itself)."""
    from pyspark.sql.pandas.types import to_arrow_schema

    return to_arrow_schema(spark_schema(), timezone="UTC")


def projection(schema: StructType | None) -> tuple[str, ...] | None:
    """The columns a schema given to the reader (``spark.read.schema("body BINARY, ...")``)
    asks for, checked against :data:`SCHEMA_DDL`: some of its columns, with their types, in any
    order. None when it is the whole schema. Fewer columns cost less to hand over to Spark."""
    if schema is None:
        return None
    full = {f.name: f.dataType.simpleString() for f in spark_schema().fields}
    names = tuple(f.name for f in schema.fields)
    if not names:
        raise SparkOptionError("the schema given to the reader has no columns: give some of "
                               + ", ".join(COLUMNS))
    for field in schema.fields:
        want = full.get(field.name)
        if want is None:
            raise SparkOptionError(f"column {field.name!r} of the given schema is not a column of the "
                                   f"rocketmq sources; they are {', '.join(COLUMNS)}")
        if field.dataType.simpleString() != want:
            given = field.dataType.simpleString().upper()
            raise SparkOptionError(f"column {field.name} is {want.upper()} in the rocketmq sources, "
                                   f"not {given}: give it that type in the schema")
    if len(set(names)) != len(names):
        raise SparkOptionError(f"the schema given to the reader names a column twice: {', '.join(names)}")
    return None if names == COLUMNS else names


def project(batch: pa.RecordBatch, columns: tuple[str, ...] | None) -> pa.RecordBatch:
    """``batch`` (of the whole schema) cut down to ``columns`` (None: all)."""
    return batch if columns is None else batch.select(list(columns))


def to_record_batch(broker_name: str, msgs: Sequence[MessageExt]) -> pa.RecordBatch:
    """One record batch of ``msgs`` (all of one broker), columns as :data:`SCHEMA_DDL`."""
    import pyarrow as pa

    schema = arrow_schema()
    columns = {
        "topic": [m.topic for m in msgs],
        "brokerName": [broker_name] * len(msgs),
        "queueId": [m.queue_id for m in msgs],
        "queueOffset": [m.queue_offset for m in msgs],
        "commitLogOffset": [m.commit_log_offset for m in msgs],
        "msgId": [m.msg_id or m.offset_msg_id for m in msgs],
        "keys": [m.properties.get(P.KEYS) for m in msgs],
        "tags": [m.properties.get(P.TAGS) for m in msgs],
        "body": [bytes(m.body) for m in msgs],
        "properties": [m.properties for m in msgs],
        "bornTimestamp": [m.born_timestamp * 1000 for m in msgs],
        "storeTimestamp": [m.store_timestamp * 1000 for m in msgs],
        "bornHost": [m.born_host for m in msgs],
        "storeHost": [m.store_host for m in msgs],
        "reconsumeTimes": [m.reconsume_times for m in msgs],
        "sysFlag": [m.sys_flag for m in msgs],
    }
    arrays = [pa.array(columns[f.name], type=f.type) for f in schema]
    return pa.RecordBatch.from_arrays(arrays, schema=schema)
