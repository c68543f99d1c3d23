"""Crash-test helpers: run :mod:`bolide.testing.crash_writer` in a child process, SIGKILL it,
and check a reopened store against what the child was told had been stored; plus ways to
damage store files (flip a byte, zero a range) and to run a store on a small filesystem.
"""

from __future__ import annotations

import contextlib
import errno
import hashlib
import os
import queue
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from bolide.common import properties as P
from bolide.common import sysflag
from bolide.store import GetStatus, MessageStore
from bolide.store.consume_queue import ENTRY_SIZE
from bolide.store.record import body_crc, decode_record, read_total_size


def body_digest(body: bytes) -> str:
    return hashlib.blake2b(body, digest_size=8).hexdigest()


def format_ack(kind: str, msg_id: str, topic: str, queue_id: int, queue_offset: int,
               commit_log_offset: int, body: bytes) -> str:
    """``ACK kind msg_id topic queue_id queue_offset commit_log_offset body_len digest``.

    ``kind`` is ``Q`` for a message with a ConsumeQueue entry, ``P`` for one without
    (a transactional half message); its queue offset is then -1.
    """
    return (f"ACK {kind} {msg_id} {topic} {queue_id} {queue_offset} {commit_log_offset} "
            f"{len(body)} {body_digest(body)}")


@dataclass(frozen=True, slots=True)
class Ack:
    """One message the store acknowledged (PUT_OK) to the child process."""

    kind: str
    msg_id: str
    topic: str
    queue_id: int
    queue_offset: int
    commit_log_offset: int
    body_len: int
    digest: str

    @classmethod
    def parse(cls, line: str) -> Ack:
        tag, kind, msg_id, topic, qid, qoff, phys, size, digest = line.split(" ")
        if tag != "ACK":
            raise ValueError(f"not an ACK line: {line!r}")
        return cls(kind, msg_id, topic, int(qid), int(qoff), int(phys), int(size), digest)


class CrashWriterProcess:
    """A ``crash_writer`` child whose stdout is read line by line on a thread.

    Use as a context manager: on exit the child is killed if it still runs.
    """

    def __init__(self, root: Path, *, flush_disk_type: str, seed: int, threads: int = 4,
                 count: int = 0, commit_log_size: int = 64 * 1024,
                 consume_queue_size: int = 100 * 20, checkpoint_every_ms: int = 0,
                 stderr_path: Path | None = None) -> None:
        self.root = root
        cmd = [sys.executable, "-m", "bolide.testing.crash_writer", "--root", str(root),
               "--flush-disk-type", flush_disk_type, "--seed", str(seed),
               "--threads", str(threads), "--count", str(count),
               "--commit-log-size", str(commit_log_size),
               "--consume-queue-size", str(consume_queue_size),
               "--checkpoint-every-ms", str(checkpoint_every_ms)]
        self.stderr_path = stderr_path or root.parent / f"crash_writer-{seed}.stderr"
        self._stderr: IO[bytes] = open(self.stderr_path, "wb")  # noqa: SIM115 (closed in kill)
        self.proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=self._stderr)
        self.acks: list[Ack] = []
        self.failures: list[str] = []
        self.ready_line: str | None = None
        self.done = False
        self._lines: queue.Queue[str | None] = queue.Queue()
        self._reader = threading.Thread(target=self._read, name="crash-writer-stdout",
                                        daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.proc.stdout is not None
        for raw in self.proc.stdout:
            if raw.endswith(b"\n"):  # a line cut by the kill is not an acknowledgement
                self._lines.put(raw.decode().rstrip("\n"))
        self._lines.put(None)

    def _take(self, line: str) -> None:
        if line.startswith("ACK "):
            self.acks.append(Ack.parse(line))
        elif line.startswith("READY"):
            self.ready_line = line
        elif line == "DONE":
            self.done = True
        else:
            self.failures.append(line)

    def _next(self, deadline: float) -> str | None:
        try:
            line = self._lines.get(timeout=max(0.0, deadline - time.monotonic()))
        except queue.Empty:
            raise TimeoutError(self._describe("no output from the writer in time")) from None
        if line is None:
            self._lines.put(None)  # keep reporting the end
        return line

    def wait_ready(self, timeout: float = 30.0) -> str:
        """Block until the child has opened (and recovered) the store."""
        deadline = time.monotonic() + timeout
        while self.ready_line is None:
            line = self._next(deadline)
            if line is None:
                raise RuntimeError(self._describe("the writer exited before it was ready"))
            self._take(line)
        return self.ready_line

    def wait_acks(self, count: int, timeout: float = 30.0) -> None:
        """Block until at least ``count`` messages are acknowledged (or the child stops)."""
        deadline = time.monotonic() + timeout
        while len(self.acks) < count and not self.failures:
            line = self._next(deadline)
            if line is None:
                return
            self._take(line)

    def wait_exit(self, timeout: float = 60.0) -> int:
        """Read everything until the child exits by itself; returns its exit code."""
        deadline = time.monotonic() + timeout
        while (line := self._next(deadline)) is not None:
            self._take(line)
        code = self.proc.wait(max(0.0, deadline - time.monotonic()))
        self._stderr.close()
        return code

    def kill(self) -> list[Ack]:
        """SIGKILL the child, collect the lines it wrote before dying; returns every ack."""
        if self.proc.poll() is None:
            os.kill(self.proc.pid, signal.SIGKILL)
        self.proc.wait(30)
        self._reader.join(30)
        while True:
            line = self._lines.get_nowait() if not self._lines.empty() else None
            if line is None:
                break
            self._take(line)
        self._stderr.close()
        return self.acks

    def stderr_text(self) -> str:
        with contextlib.suppress(OSError):
            return self.stderr_path.read_text(errors="replace")
        return ""

    def _describe(self, what: str) -> str:
        return f"{what}; exit code {self.proc.poll()}; stderr:\n{self.stderr_text()[-4000:]}"

    def __enter__(self) -> CrashWriterProcess:
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc.poll() is None:
            self.kill()
        if not self._stderr.closed:
            self._stderr.close()


# -- checks of a reopened store -----------------------------------------------------------


def kill_after_acks(cmd: list[str], target: int, ctx: str, *, first_line: str | None = None,
                    timeout_s: float = 90.0) -> int:
    """Run ``cmd``, a writer printing the index of each message it had acknowledged (one a
    line, after ``first_line`` when given), and SIGKILL it once ``target`` are acknowledged (or
    after ``timeout_s``); how many it had acknowledged. ``ctx`` names the round in failures."""
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    acked = 0
    try:
        assert proc.stdout is not None
        if first_line is not None:
            assert proc.stdout.readline().strip() == first_line, f"{ctx}: no {first_line!r} line"
        deadline = time.monotonic() + timeout_s
        while acked < target and time.monotonic() < deadline:
            line = proc.stdout.readline()
            assert line, f"{ctx}: the writer exited ({proc.poll()})"
            acked = int(line) + 1
        os.kill(proc.pid, signal.SIGKILL)
    finally:
        proc.kill()
        proc.wait()
    return acked


def check_acknowledged(store: MessageStore, acks: list[Ack]) -> list[str]:
    """Every acknowledged message must be readable, intact and where it was reported."""
    problems: list[str] = []
    for ack in acks:
        if ack.kind == "Q":
            got = store.get_message("crash_check", ack.topic, ack.queue_id, ack.queue_offset, 1)
            if got.status is not GetStatus.FOUND or got.queue_offsets[:1] != [ack.queue_offset]:
                problems.append(f"{ack}: not readable at its queue offset ({got.status.value}, "
                                f"queue holds [{got.min_offset}, {got.max_offset}))")
                continue
            msg = got.messages[0]
            got.release()
        else:
            found = store.look_message_by_offset(ack.commit_log_offset)
            if found is None:
                problems.append(f"{ack}: no record at its CommitLog offset")
                continue
            msg = found
        wrong = []
        if msg.commit_log_offset != ack.commit_log_offset:
            wrong.append(f"CommitLog offset {msg.commit_log_offset}")
        if msg.properties.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX) != ack.msg_id:
            wrong.append(f"id {msg.properties.get(P.UNIQ_CLIENT_MESSAGE_ID_KEYIDX)}")
        if len(msg.body) != ack.body_len or body_digest(msg.body) != ack.digest:
            wrong.append(f"body of {len(msg.body)} bytes with digest {body_digest(msg.body)}")
        if msg.body_crc != body_crc(msg.body):
            wrong.append("BODYCRC does not match the body")
        if ack.kind == "Q" and (msg.topic, msg.queue_id) != (ack.topic, ack.queue_id):
            wrong.append(f"queue {msg.topic}/{msg.queue_id}")
        if ack.kind == "P" and sysflag.gets_queue_entry(msg.sys_flag):
            wrong.append(f"sys flag {msg.sys_flag:#x}")
        if wrong:
            problems.append(f"{ack}: stored message differs: {', '.join(wrong)}")
    return problems


def check_queues(store: MessageStore) -> list[str]:
    """Each queue must be contiguous: every offset in [min, max) reads a whole record of that
    queue with that queue offset and a body that matches its CRC."""
    problems: list[str] = []
    for cq in store.consume_queues():
        where = f"{cq.topic}/{cq.queue_id}"
        lo, hi = cq.min_offset, cq.max_offset
        offset = lo
        while offset < hi:
            entry = cq.entry(offset)
            if entry is None:
                problems.append(f"{where}: no entry at offset {offset} in [{lo}, {hi})")
                break
            phys, size, _ = entry
            buf = store.commit_log.read(phys, size)
            if buf is None or read_total_size(buf, 0) != size:
                problems.append(f"{where}@{offset}: entry ({phys}, {size}) reads no whole record")
            else:
                msg = decode_record(buf, 0)
                if ((msg.topic, msg.queue_id, msg.queue_offset) != (cq.topic, cq.queue_id, offset)
                        or msg.body_crc != body_crc(msg.body)):
                    problems.append(f"{where}@{offset}: record says {msg.topic}/{msg.queue_id}"
                                    f"@{msg.queue_offset}, CRC ok: {msg.body_crc == body_crc(msg.body)}")
                buf.release()
            offset += 1
        if cq.files.max_offset % ENTRY_SIZE:
            problems.append(f"{where}: ConsumeQueue ends inside an entry")
    return problems


# -- damaging files -------------------------------------------------------------------------


def flip_byte(path: Path, position: int) -> int:
    """XOR the byte at ``position`` of ``path`` with 0xFF; returns the old value."""
    with open(path, "r+b") as f:
        f.seek(position)
        old = f.read(1)[0]
        f.seek(position)
        f.write(bytes([old ^ 0xFF]))
        f.flush()
        os.fsync(f.fileno())
    return old


def zero_range(path: Path, start: int, end: int) -> None:
    """Overwrite bytes [start, end) of ``path`` with zeros (a torn write)."""
    with open(path, "r+b") as f:
        f.seek(start)
        f.write(bytes(end - start))
        f.flush()
        os.fsync(f.fileno())


def nonzero_after(path: Path, position: int) -> int:
    """How many bytes after ``position`` in ``path`` are not zero."""
    data = path.read_bytes()[position:]
    return len(data) - data.count(0)


# -- small filesystems ---------------------------------------------------------------------


@contextlib.contextmanager
def mounted_tmpfs(mount_point: Path, size: str) -> Iterator[Path]:
    """Mount a tmpfs of ``size`` (e.g. ``"2m"``) at ``mount_point``; unmounted on exit.

    Raises ``PermissionError`` (or ``OSError``) when this process may not mount.
    """
    mount_point.mkdir(parents=True, exist_ok=True)
    done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs",
                           str(mount_point)], capture_output=True, text=True)
    if done.returncode != 0:
        raise PermissionError(f"mount -t tmpfs failed ({done.returncode}): {done.stderr.strip()}")
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=True, capture_output=True)


def eat_space(path: Path, leave_bytes: int, attempts: int = 50) -> int:
    """Create ``path`` taking all free space of its filesystem but ``leave_bytes``; returns its size.

    Retries when something else (a store preallocating a segment) takes space meanwhile.
    """
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        for _ in range(attempts):
            st = os.statvfs(path.parent)
            size = max(0, st.f_bavail * st.f_frsize - leave_bytes)
            if not size:
                return 0
            try:
                os.posix_fallocate(fd, 0, size)
                return size
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
                os.ftruncate(fd, 0)
        raise OSError(errno.ENOSPC, f"could not leave exactly {leave_bytes} bytes free")
    finally:
        os.close(fd)
