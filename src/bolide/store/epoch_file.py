"""The epoch file ``{storePathRootDir}/epochFileCheckpoint`` (RocketMQ 5 controller mode).

Stub: implemented in the next commit.
"""

from __future__ import annotations

from dataclasses import dataclass

MAX_OFFSET = (1 << 63) - 1


@dataclass(slots=True)
class EpochEntry:
    """Epoch ``epoch`` wrote the CommitLog from ``start_offset`` to ``end_offset``."""

    epoch: int
    start_offset: int
    end_offset: int = MAX_OFFSET
