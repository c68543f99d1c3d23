"""What a consumer answers to GET_CONSUMER_RUNNING_INFO (307), which a broker relays from an
admin (``mqadmin consumerStatus``, ``bolide admin consumerStatus``): the Java property keys
the admin tools read, and the stacks of the process's threads and tasks (Java's ``jstack``)."""

from __future__ import annotations

import asyncio
import sys
import threading
import traceback

from bolide.protocol.bodies.admin import (
    PROP_CLIENT_VERSION,
    PROP_CONSUME_TYPE,
    PROP_CONSUMER_START_TIMESTAMP,
    PROP_NAMESERVER_ADDR,
)
from bolide.protocol.codes import DEFAULT_VERSION_DESC

MAX_STACKS_CHARS = 256 * 1024  # the jstack text is cut there (a frame stays far below the limit)
TASK_FRAMES = 8  # frames shown per asyncio task


def base_properties(namesrv_addrs: list[str], consume_type: str, start_ms: int) -> dict[str, str]:
    """The properties every Java consumer reports, under Java's keys."""
    return {PROP_NAMESERVER_ADDR: "".join(f"{a};" for a in namesrv_addrs),
            PROP_CONSUME_TYPE: consume_type,
            PROP_CLIENT_VERSION: DEFAULT_VERSION_DESC,
            PROP_CONSUMER_START_TIMESTAMP: str(start_ms)}


def stacks_text(limit: int = MAX_STACKS_CHARS) -> str:
    """Every thread's stack, then the asyncio tasks of the calling loop with their top frames."""
    frames = sys._current_frames()
    parts: list[str] = []
    for thread in threading.enumerate():
        frame = frames.get(thread.ident or -1)
        head = f'"{thread.name}"{" daemon" if thread.daemon else ""} ident={thread.ident}\n'
        parts.append(head + ("".join(traceback.format_stack(frame)) if frame is not None else ""))
    try:
        tasks = sorted(asyncio.all_tasks(), key=lambda t: t.get_name())
    except RuntimeError:  # no running loop
        tasks = []
    for task in tasks:
        lines = [f"Task {task.get_name()!r} {task.get_coro()!r}\n"]
        for frame in task.get_stack(limit=TASK_FRAMES):
            lines.append(f'  File "{frame.f_code.co_filename}", line {frame.f_lineno}, '
                         f"in {frame.f_code.co_name}\n")
        parts.append("".join(lines))
    text = "\n".join(parts)
    if len(text) > limit:
        text = text[:limit] + f"\n... ({len(text) - limit} more characters)\n"
    return text
