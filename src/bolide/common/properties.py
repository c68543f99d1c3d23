"""Message properties: the ``key 0x01 value 0x02`` string RocketMQ stores after each topic."""

NAME_VALUE_SEPARATOR = "\x01"
PROPERTY_SEPARATOR = "\x02"
KEY_SEPARATOR = " "

KEYS = "KEYS"
TAGS = "TAGS"
WAIT_STORE_MSG_OK = "WAIT"
DELAY_TIME_LEVEL = "DELAY"
RETRY_TOPIC = "RETRY_TOPIC"
REAL_TOPIC = "REAL_TOPIC"
REAL_QUEUE_ID = "REAL_QID"
TRANSACTION_PREPARED = "TRAN_MSG"
PRODUCER_GROUP = "PGROUP"
MIN_OFFSET = "MIN_OFFSET"
MAX_OFFSET = "MAX_OFFSET"
ORIGIN_MESSAGE_ID = "ORIGIN_MESSAGE_ID"
RECONSUME_TIME = "RECONSUME_TIME"
UNIQ_CLIENT_MESSAGE_ID_KEYIDX = "UNIQ_KEY"
MAX_RECONSUME_TIMES = "MAX_RECONSUME_TIMES"
CLUSTER = "CLUSTER"
MSG_REGION = "MSG_REGION"  # the broker's region, stamped on every stored message
TRACE_SWITCH = "TRACE_ON"  # the broker's traceOn, stamped on every stored message
# request-reply (DefaultMQProducer.request)
CORRELATION_ID = "CORRELATION_ID"
REPLY_TO_CLIENT = "REPLY_TO_CLIENT"
MESSAGE_TTL = "TTL"
MESSAGE_TYPE = "MSG_TYPE"
REPLY_MESSAGE_ARRIVE_TIME = "ARRIVE_TIME"
PUSH_REPLY_TIME = "PUSH_REPLY_TIME"
REPLY_MESSAGE_FLAG = "reply"  # MSG_TYPE of a reply
# timer messages (RocketMQ 5: Message.setDeliverTimeMs / setDelayTimeMs / setDelayTimeSec)
TIMER_DELIVER_MS = "TIMER_DELIVER_MS"
TIMER_DELAY_MS = "TIMER_DELAY_MS"
TIMER_DELAY_SEC = "TIMER_DELAY_SEC"
TIMER_OUT_MS = "TIMER_OUT_MS"  # the delivery time the broker settled on
TIMER_DEL_UNIQKEY = "TIMER_DEL_UNIQKEY"
TRANSIENT_PREFIX = "__RMQ.TRANSIENT."

MAX_PROPERTIES_BYTES = 32767


def encode_properties(props: dict[str, str]) -> bytes:
    """Encode ``props`` as RocketMQ does; every pair, the last included, ends with 0x02."""
    if not props:
        return b""
    return "".join(
        [f"{k}\x01{v}\x02" for k, v in props.items() if v is not None]
    ).encode("utf-8")


def decode_properties(data: bytes | memoryview | str) -> dict[str, str]:
    """Decode a properties blob; pairs with an empty key or an empty value are dropped."""
    text = data if isinstance(data, str) else bytes(data).decode("utf-8", "replace")
    result: dict[str, str] = {}
    for item in text.split(PROPERTY_SEPARATOR):
        sep = item.find(NAME_VALUE_SEPARATOR)
        if 0 < sep < len(item) - 1:
            result[item[:sep]] = item[sep + 1 :]
    return result


def find_property(data: bytes | memoryview, key: bytes) -> str | None:
    """Return one property's value from an encoded blob without decoding the others."""
    blob = bytes(data)
    needle = key + b"\x01"
    pos = 0
    while True:
        i = blob.find(needle, pos)
        if i < 0:
            return None
        if i == 0 or blob[i - 1] == 2:
            end = blob.find(b"\x02", i)
            value = blob[i + len(needle) : end if end >= 0 else len(blob)]
            return value.decode("utf-8", "replace") if value else None
        pos = i + 1
