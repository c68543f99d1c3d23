"""Options of the ``rocketmq`` Spark source and sink, parsed from Spark's string options.

Spark hands a data source its options as a case-insensitive dict of strings (keys lower-cased);
these functions turn them into frozen dataclasses and refuse bad values with a message that
says what to write instead. Pure: no Spark, no network.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from bolide.client.config import ClientConfig
from bolide.client.errors import ClientConfigError

EARLIEST = -2  # offset sentinels in JSON offsets, as in Kafka and rocketmq-spark
LATEST = -1

READ_OPTIONS = {
    "nameserver", "topic", "startingoffsets", "endingoffsets", "startingtimestamp", "endingtimestamp",
    "subexpression", "tags", "minpartitions", "failondataloss", "maxoffsetspertrigger",
    "minoffsetspertrigger", "maxtriggerdelay", "consumergroup", "readbatchsize", "pullbatchsize",
    "timeoutms", "path", "accesskey", "secretkey", "usetls", "tlscafile", "tlscertfile", "tlskeyfile",
}
WRITE_OPTIONS = {"nameserver", "topic", "producergroup", "sendtimeoutms", "retrytimes", "batchsize",
                 "timeoutms", "path", "checkpointlocation", "accesskey", "secretkey", "usetls",
                 "tlscafile", "tlscertfile", "tlskeyfile"}

# Offsets given in JSON: topic -> broker -> queue id -> offset, or topic -> queue id -> offset
# (every broker's queue with that id).
OffsetSpec = str | dict[str, dict[str, Any]]


class SparkOptionError(ClientConfigError):
    """An option of the ``rocketmq`` data source has a value it cannot use."""


def _get(options: Mapping[str, str], name: str) -> str | None:
    value = options.get(name.lower())
    if value is None:
        return None
    value = str(value).strip()
    return value or None


def _int(options: Mapping[str, str], name: str, *, minimum: int = 0) -> int | None:
    raw = _get(options, name)
    if raw is None:
        return None
    try:
        value = int(raw)
    except ValueError:
        raise SparkOptionError(f"option {name}={raw!r} is not an integer: write a whole number") from None
    if value < minimum:
        raise SparkOptionError(f"option {name}={value} must be at least {minimum}")
    return value


def _bool(options: Mapping[str, str], name: str, default: bool) -> bool:
    raw = _get(options, name)
    if raw is None:
        return default
    if raw.lower() in ("true", "1", "yes"):
        return True
    if raw.lower() in ("false", "0", "no"):
        return False
    raise SparkOptionError(f"option {name}={raw!r} is not a boolean: write true or false")


def _duration_ms(options: Mapping[str, str], name: str, default_ms: int) -> int:
    """A duration: milliseconds, or a number with unit ms, s, m or h (``15m``)."""
    raw = _get(options, name)
    if raw is None:
        return default_ms
    units = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000}
    text = raw.lower().replace(" ", "")
    for unit in ("ms", "s", "m", "h"):
        if text.endswith(unit) and text[: -len(unit)].isdigit():
            return int(text[: -len(unit)]) * units[unit]
    if text.isdigit():
        return int(text)
    raise SparkOptionError(f"option {name}={raw!r} is not a duration: write e.g. 500ms, 30s or 15m")


def parse_offsets(name: str, raw: str | None, default: str, *, allow_latest: bool = True,
                  allow_earliest: bool = True) -> OffsetSpec:
    """``earliest``, ``latest`` or JSON ``{"T": {"broker-a": {"0": 23}}}`` / ``{"T": {"0": 23}}``
    with -2 for earliest and -1 for latest."""
    text = (raw or default).strip()
    if text.lower() in ("earliest", "latest"):
        word = text.lower()
        if (word == "latest" and not allow_latest) or (word == "earliest" and not allow_earliest):
            raise SparkOptionError(f"option {name}={word} is not allowed here")
        return word
    try:
        data = json.loads(text)
    except ValueError:
        raise SparkOptionError(f"option {name}={text!r} is neither earliest, latest nor JSON such as "
                               '{"TopicA": {"broker-a": {"0": 23, "1": -2}}}') from None
    if not isinstance(data, dict) or not all(isinstance(v, dict) for v in data.values()):
        raise SparkOptionError(f"option {name} must map topics to queue offsets, e.g. "
                               '{"TopicA": {"broker-a": {"0": 23}}} or {"TopicA": {"0": 23}}')
    for topic, per in data.items():
        for key, value in per.items():
            leaves = value.items() if isinstance(value, dict) else [(key, value)]
            for qid, off in leaves:
                if not str(qid).isdigit() or not isinstance(off, int) or isinstance(off, bool) or off < -2:
                    raise SparkOptionError(
                        f"option {name}: {topic}/{key} has {qid!r}: {off!r}; queue ids are digit strings "
                        "and offsets are integers >= 0, -2 (earliest) or -1 (latest)")
                if (off == LATEST and not allow_latest) or (off == EARLIEST and not allow_earliest):
                    raise SparkOptionError(f"option {name}: {off} is not allowed here ({topic}/{key})")
    return data


@dataclass(frozen=True, slots=True)
class ReadOptions:
    """What a read (batch or streaming) of ``rocketmq`` was asked for."""

    nameserver: str | ClientConfig  # a ClientConfig when requests are signed for plain ACL
    topics: tuple[str, ...]
    starting: OffsetSpec
    ending: OffsetSpec
    starting_timestamp: int | None = None
    ending_timestamp: int | None = None
    expression: str = "*"
    min_partitions: int | None = None
    fail_on_data_loss: bool = True
    max_offsets_per_trigger: int | None = None
    min_offsets_per_trigger: int | None = None
    max_trigger_delay_ms: int = 15 * 60_000
    consumer_group: str | None = None
    read_batch_size: int = 65536  # rows per Arrow batch at most (the decoder stops at 8 MiB too)
    pull_batch_size: int = 32  # messages asked for per pull; the broker caps it
    timeout_ms: int = 10_000


def _check_known(options: Mapping[str, str], known: set[str], what: str) -> None:
    unknown = sorted(k for k in options if k.lower() not in known)
    if unknown:
        raise SparkOptionError(f"unknown {what} option(s) {', '.join(unknown)}: the options are "
                               + ", ".join(sorted(known - {"path", "checkpointlocation"})))


def _nameserver(options: Mapping[str, str]) -> str | ClientConfig:
    """The NameServers, with the plain-ACL keys (options accessKey and secretKey) and TLS
    (useTLS, tlsCaFile, and tlsCertFile with tlsKeyFile for servers that require a client
    certificate) when given."""
    ns = _get(options, "nameserver")
    if ns is None:
        raise SparkOptionError('option nameserver is required: .option("nameserver", "127.0.0.1:9876") '
                               "(several NameServers joined by ';')")
    access_key, secret_key = _get(options, "accessKey"), _get(options, "secretKey")
    use_tls, ca_file = _bool(options, "useTLS", False), _get(options, "tlsCaFile")
    cert_file, key_file = _get(options, "tlsCertFile"), _get(options, "tlsKeyFile")
    if access_key is None and secret_key is None and not use_tls and ca_file is None and cert_file is None:
        return ns
    if (access_key is None) != (secret_key is None):
        raise SparkOptionError("give both accessKey and secretKey (an account of the brokers' "
                               "plain_acl.yml), or neither")
    for name, value in (("tlsCaFile", ca_file), ("tlsCertFile", cert_file), ("tlsKeyFile", key_file)):
        if value is not None and not use_tls:
            raise SparkOptionError(f'option {name} needs .option("useTLS", "true")')
    if (cert_file is None) != (key_file is None):
        raise SparkOptionError("give both tlsCertFile and tlsKeyFile (the client's PEM certificate "
                               "and key), or neither")
    return ClientConfig(ns, access_key=access_key, secret_key=secret_key, use_tls=use_tls,
                        tls_ca_file=ca_file, tls_cert_file=cert_file, tls_key_file=key_file)


def read_options(options: Mapping[str, str], *, streaming: bool) -> ReadOptions:
    """Parse the options of ``spark.read`` (``streaming=False``) or ``spark.readStream``."""
    _check_known(options, READ_OPTIONS, "read")
    raw_topics = _get(options, "topic") or _get(options, "path")
    topics = tuple(dict.fromkeys(t.strip() for t in (raw_topics or "").split(",") if t.strip()))
    if not topics:
        raise SparkOptionError('option topic is required: .option("topic", "TopicA") or a comma list '
                               '"TopicA,TopicB"')
    starting = parse_offsets("startingOffsets", _get(options, "startingOffsets"),
                             "latest" if streaming else "earliest")
    if streaming:
        if _get(options, "endingOffsets") or _get(options, "endingTimestamp"):
            raise SparkOptionError("endingOffsets and endingTimestamp are for batch reads only: a stream "
                                   "has no end (use trigger(availableNow=True) to stop at the current end)")
        ending: OffsetSpec = "latest"
    else:
        ending = parse_offsets("endingOffsets", _get(options, "endingOffsets"), "latest",
                               allow_earliest=False)
    for topic in (starting, ending):
        if isinstance(topic, dict):
            extra = sorted(set(topic) - set(topics))
            if extra:
                raise SparkOptionError(f"offsets are given for topic(s) {', '.join(extra)} that option "
                                       f"topic does not name ({', '.join(topics)})")
    expression = _get(options, "subExpression") or _get(options, "tags") or "*"
    opts = ReadOptions(
        nameserver=_nameserver(options), topics=topics, starting=starting, ending=ending,
        starting_timestamp=_int(options, "startingTimestamp"),
        ending_timestamp=_int(options, "endingTimestamp"),
        expression=expression,
        min_partitions=_int(options, "minPartitions", minimum=1),
        fail_on_data_loss=_bool(options, "failOnDataLoss", True),
        max_offsets_per_trigger=_int(options, "maxOffsetsPerTrigger", minimum=1),
        min_offsets_per_trigger=_int(options, "minOffsetsPerTrigger", minimum=1),
        max_trigger_delay_ms=_duration_ms(options, "maxTriggerDelay", 15 * 60_000),
        consumer_group=_get(options, "consumerGroup"),
        read_batch_size=_int(options, "readBatchSize", minimum=1) or 65536,
        pull_batch_size=_int(options, "pullBatchSize", minimum=1) or 32,
        timeout_ms=_int(options, "timeoutMs", minimum=1) or 10_000,
    )
    if (opts.max_offsets_per_trigger and opts.min_offsets_per_trigger
            and opts.min_offsets_per_trigger > opts.max_offsets_per_trigger):
        raise SparkOptionError(f"minOffsetsPerTrigger ({opts.min_offsets_per_trigger}) exceeds "
                               f"maxOffsetsPerTrigger ({opts.max_offsets_per_trigger})")
    return opts


@dataclass(frozen=True, slots=True)
class WriteOptions:
    """What a write (batch or streaming) to ``rocketmq`` was asked for."""

    nameserver: str | ClientConfig  # a ClientConfig when requests are signed for plain ACL
    topic: str | None = None
    producer_group: str = "BOLIDE_SPARK_PRODUCER"
    send_timeout_ms: int = 3000
    retry_times: int = 2
    batch_size: int = 128


def write_options(options: Mapping[str, str]) -> WriteOptions:
    _check_known(options, WRITE_OPTIONS, "write")
    return WriteOptions(
        nameserver=_nameserver(options),
        topic=_get(options, "topic") or _get(options, "path"),
        producer_group=_get(options, "producerGroup") or "BOLIDE_SPARK_PRODUCER",
        send_timeout_ms=_int(options, "sendTimeoutMs", minimum=1) or 3000,
        retry_times=_int(options, "retryTimes") if _get(options, "retryTimes") is not None else 2,  # type: ignore[arg-type]
        batch_size=_int(options, "batchSize", minimum=1) or 128,
    )
