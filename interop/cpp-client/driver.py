"""The official Apache RocketMQ C++ client (``rocketmq-client-cpp``, through its C API, as built
into the ``rocketmq`` wheel on PyPI with that wheel's ctypes binding) as a command-line driver
for Bolide's interop tests (``tests/interop/test_cpp_client_bolide.py``).

Commands (tab-separated output lines, flushed as they are printed):

- ``send-modes NAMESRV TOPIC N``: N sync, async, oneway, orderly (queue ``i % queues``) and
  batched sends, each with tags ``<mode>`` and keys ``<mode>-<i>``, then one sync send of a
  64 KiB body (the client compresses bodies over 4 KiB) and one with delay level 1;
  ``SEND mode status msgId offset`` per answered send.
- ``consume NAMESRV TOPIC GROUP MODEL INSTANCE POLICY``: a push consumer (``MODEL``
  ``CLUSTERING`` or ``BROADCASTING``, instance name ``INSTANCE``) printing ``READY`` once
  started, then ``MSG body tags keys queueId queueOffset msgId reconsumeTimes topic bodyLength
  storeSize`` per delivery until its standard input closes (then ``DONE``). ``POLICY``:
  ``ok`` (every delivery consumed), ``retry`` (a delivery fails until the message's
  reconsume times reach 2), ``orderly`` (the orderly listener; every delivery consumed). This
  client hands all the messages of a pull to one listener call, which the C API ends at the
  first failure: the whole pull is sent back.
- ``acl NAMESRV TOPIC N ACCESS_KEY SECRET_KEY``: N sync sends signed with the account
  (``SEND acl status msgId offset``), then one signed with a wrong secret and one unsigned, each
  ``REFUSED case error`` (or ``SEND`` if the broker took it).
- ``pull NAMESRV TOPIC GROUP``: the pull consumer reads every queue from offset 0 to its end,
  ``MSG ...`` as above per message.

Consumers sign their requests with ``CPP_ACCESS_KEY`` and ``CPP_SECRET_KEY`` when those are
set. The client writes its log under ``$HOME/logs/rocketmq-cpp``.
"""

from __future__ import annotations

import os
import sys
import threading
import time

from rocketmq.client import Message, Producer, PullConsumer, PushConsumer, RecvMessage
from rocketmq.ffi import MSG_CALLBACK_FUNC, MessageModel, dll

OUT = threading.Lock()
BIG = 64 * 1024
SEND_TIMEOUT_MS = 10_000


def emit(*fields: object) -> None:
    """One output line, whole even when consumer threads print at once."""
    with OUT:
        sys.stdout.write("\t".join(str(f) for f in fields) + "\n")
        sys.stdout.flush()


def text(value: bytes | str | None) -> str:
    """The binding hands back bytes or text, depending on the getter."""
    if isinstance(value, bytes):
        return value.decode("utf-8", "replace")
    return value or ""


def message(topic: str, body: bytes, tags: str, keys: str) -> Message:
    msg = Message(topic)
    msg.set_tags(tags)
    msg.set_keys(keys)
    msg.set_body(body)
    return msg


def producer(namesrv: str, group: str, account: tuple[str, str] | None = None) -> Producer:
    p = Producer(group, timeout=SEND_TIMEOUT_MS)
    p.set_namesrv_addr(namesrv)
    if account is not None:
        p.set_session_credentials(account[0], account[1], "")
    p.start()
    return p


def acl(namesrv: str, topic: str, n: int, access_key: str, secret_key: str) -> None:
    p = producer(namesrv, "cpp_acl_pg", (access_key, secret_key))
    for i in range(n):
        r = p.send_sync(message(topic, f"acl-{i}".encode(), "acl", f"acl-{i}"))
        emit("SEND", "acl", r.status.name, r.msg_id, r.offset)
    p.shutdown()
    for case, account in (("wrong-secret", (access_key, secret_key + "-wrong")), ("unsigned", None)):
        other = producer(namesrv, f"cpp_acl_{case.replace('-', '_')}_pg", account)
        try:
            r = other.send_sync(message(topic, case.encode(), case, case))
            emit("SEND", case, r.status.name, r.msg_id, r.offset)
        except Exception as exc:  # the binding raises its own exception types
            emit("REFUSED", case, " ".join(str(exc).split()))
        other.shutdown()


def send_modes(namesrv: str, topic: str, n: int) -> None:
    p = producer(namesrv, "cpp_send_modes_pg")
    for i in range(n):
        r = p.send_sync(message(topic, f"sync-{i}".encode(), "sync", f"sync-{i}"))
        emit("SEND", "sync", r.status.name, r.msg_id, r.offset)
    answered = threading.Semaphore(0)

    def ok(r: object) -> None:
        emit("SEND", "async", r.status.name, r.msg_id, r.offset)  # type: ignore[attr-defined]
        answered.release()

    def failed(exc: Exception) -> None:
        emit("FAIL", "async", exc)
        answered.release()

    for i in range(n):
        p.send_async(message(topic, f"async-{i}".encode(), "async", f"async-{i}"), ok, failed)
    for _ in range(n):
        if not answered.acquire(timeout=60):
            raise SystemExit("async sends were not answered within 60 s")
    for i in range(n):
        p.send_oneway(message(topic, f"oneway-{i}".encode(), "oneway", f"oneway-{i}"))
    for i in range(n):
        r = p.send_orderly(message(topic, f"orderly-{i}".encode(), "orderly", f"orderly-{i}"), i)
        emit("SEND", "orderly", r.status.name, r.msg_id, r.offset)
    r = p.send_batch([message(topic, f"batch-{i}".encode(), "batch", f"batch-{i}") for i in range(n)])
    emit("SEND", "batch", r.status.name, r.msg_id, r.offset)
    r = p.send_sync(message(topic, b"b" * BIG, "big", "big-0"))
    emit("SEND", "big", r.status.name, r.msg_id, r.offset)
    delayed = message(topic, b"delay-0", "delay", "delay-0")
    delayed.set_delay_time_level(1)
    r = p.send_sync(delayed)
    emit("SEND", "delay", r.status.name, r.msg_id, r.offset)
    p.shutdown()


def report(m: RecvMessage) -> None:
    body = m.body
    shown = body.decode() if len(body) < 256 else f"<{len(body)} bytes>"
    emit("MSG", shown, text(m.tags), text(m.keys), m.queue_id, m.queue_offset, text(m.id),
         m.reconsume_times, text(m.topic), len(body), m.store_size)


def consume(namesrv: str, topic: str, group: str, model: str, instance: str, policy: str) -> None:
    c = PushConsumer(group, orderly=policy == "orderly", message_model=MessageModel[model])
    c.set_namesrv_addr(namesrv)
    c.set_instance_name(instance)
    if os.environ.get("CPP_ACCESS_KEY"):
        c.set_session_credentials(os.environ["CPP_ACCESS_KEY"], os.environ["CPP_SECRET_KEY"], "")

    def on_message(_consumer: int, handle: int) -> int:
        m = RecvMessage(handle)
        report(m)
        fail = policy == "retry" and m.reconsume_times < 2
        return 1 if fail else 0  # RECONSUME_LATER : CONSUME_SUCCESS

    ctypes_callback = MSG_CALLBACK_FUNC(on_message)
    if dll.Subscribe(c._handle, topic.encode(), b"*") != 0:
        raise SystemExit(f"Subscribe failed: {text(dll.GetLatestErrorMessage())}")
    register = dll.RegisterMessageCallbackOrderly if policy == "orderly" else dll.RegisterMessageCallback
    if register(c._handle, ctypes_callback) != 0:
        raise SystemExit(f"registering the listener failed: {text(dll.GetLatestErrorMessage())}")
    c.start()
    emit("READY", instance)
    sys.stdin.read()  # until the test closes our standard input
    c.shutdown()
    emit("DONE", instance)


def pull(namesrv: str, topic: str, group: str) -> None:
    c = PullConsumer(group)
    c.set_namesrv_addr(namesrv)
    c.start()
    for m in c.pull(topic):
        report(m)
    c.shutdown()


def main(argv: list[str]) -> int:
    if not argv:
        print(__doc__, file=sys.stderr)
        return 2
    command, args = argv[0], argv[1:]
    started = time.monotonic()
    if command == "send-modes":
        send_modes(args[0], args[1], int(args[2]))
    elif command == "consume":
        consume(*args[:6])
    elif command == "acl":
        acl(args[0], args[1], int(args[2]), args[3], args[4])
    elif command == "pull":
        pull(*args[:3])
    else:
        print(f"unknown command {command!r}\n{__doc__}", file=sys.stderr)
        return 2
    print(f"{command} took {time.monotonic() - started:.1f} s", file=sys.stderr)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
