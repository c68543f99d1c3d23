"""Rereads the ACL files when they change, as RocketMQ's AclFileWatchService does."""

from __future__ import annotations

import asyncio
import logging

from bolide.broker.acl.accounts import PlainAcl
from bolide.broker.loop_service import LoopService

log = logging.getLogger(__name__)


class AclFileWatcher(LoopService):
    """Checks the files' sizes and times every ``interval_s`` and reloads them on a change."""

    TASK_NAME = "bolide-acl-watch"

    def __init__(self, acl: PlainAcl, interval_s: float = 1.0) -> None:
        self.acl = acl
        self.interval_s = interval_s

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(self.interval_s)
            try:
                await asyncio.to_thread(self.acl.reload_if_changed)
            except OSError as exc:
                log.error("cannot check the ACL files: %s", exc)
