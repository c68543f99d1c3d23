"""Moving from a lone controller to a group without losing the state: ``bolide controller seed``
replays the lone controller's event log into the replicas state and writes it as a group peer's
first Raft snapshot, before the group's first start.

Every peer is seeded from the same log, so each starts with the same snapshot (index
:data:`SEED_INDEX`, term :data:`SEED_TERM`, the same bytes: :attr:`Seed.digest` shows it) and
term. Raft takes a snapshot as committed on every peer that holds it, so no peer may start
without it: an unseeded majority could elect a leader whose log overwrites the seed. A peer
left out (or whose disk was lost later) but started while the seeded others lead gets the
snapshot from the leader.

:func:`check_store` runs at a controller's start: a group peer with no Raft state whose directory
holds a lone controller's event log refuses to start (it would drop that state), naming the seed
command.
"""

from __future__ import annotations

import hashlib
import logging
import os
import shutil
from dataclasses import dataclass
from pathlib import Path

from bolide.common.config_persist import sync_dir
from bolide.controller.config import ControllerConfig
from bolide.controller.event_log import LOG_NAME, Replay, read_log
from bolide.controller.journal import encode_snapshot
from bolide.controller.raft.storage import RAFT_DIR, RaftStorage, state_files
from bolide.controller.replicas import ReplicasState
from bolide.errors import BolideError

log = logging.getLogger(__name__)

SEED_INDEX = 1  # >= 1: a peer without it is sent the snapshot by the leader
SEED_TERM = 1
STAGING = "raft.seed.tmp"


@dataclass(frozen=True, slots=True)
class Seed:
    """A lone controller's state, as read from its event log ``path``."""

    path: Path
    replay: Replay  # the events, and a torn tail left out
    state: ReplicasState
    data: bytes  # the snapshot's data

    @property
    def digest(self) -> str:
        """The snapshot's SHA-256 (its first 16 hex digits): the same on every peer."""
        return hashlib.sha256(self.data).hexdigest()[:16]


def peer_dir(config: ControllerConfig) -> Path:
    """This controller's directory: ``<controllerStorePath>/<selfId>``."""
    return config.store_dir / config.self_id


def event_log_path(source: Path) -> Path:
    """The event log ``source`` names: the file itself, a lone controller's directory
    (``<controllerStorePath>/<selfId>``) holding it, or its ``controllerStorePath`` when one
    peer directory there holds one."""
    if not source.exists():
        raise BolideError(f"{source} does not exist: give the lone controller's directory "
                          f"(<controllerStorePath>/<selfId>) or its {LOG_NAME}")
    if source.is_file():
        return source
    if (source / LOG_NAME).is_file():
        return source / LOG_NAME
    found = sorted(source.glob(f"*/{LOG_NAME}"))
    if len(found) == 1:
        return found[0]
    if found:
        raise BolideError(f"{source} holds several controllers' event logs "
                          f"({', '.join(str(p) for p in found)}): give the lone controller's one")
    hint = (" (it holds a group peer's Raft state: a group's peers need no seed)"
            if state_files(source / RAFT_DIR) else "")
    raise BolideError(f"{source} holds no {LOG_NAME}{hint}: give the lone controller's directory "
                      f"(<controllerStorePath>/<selfId>) or its {LOG_NAME}")


def read_seed(source: Path) -> Seed:
    """The state of the lone controller's event log at ``source`` (not changed: a torn tail is
    left out and reported in :attr:`Seed.replay`, as the controller cuts it at its start)."""
    path = event_log_path(source)
    try:
        replay = read_log(path)
    except OSError as exc:
        raise BolideError(f"cannot read the controller event log {path}: {exc.strerror}; "
                          "check its permissions") from exc
    if not replay.events:
        if replay.dropped_bytes:
            raise BolideError(f"the controller event log {path} is damaged: no whole record in its "
                              f"{replay.dropped_bytes} bytes ({replay.reason}); seed from a good copy, "
                              "or start the group without seeding (every broker then removes its "
                              "brokerIdentity file)")
        raise BolideError(f"the controller event log {path} is empty: there is no state to seed; "
                          "start the group without seeding")
    state = ReplicasState()
    for event in replay.events:
        state.apply(event)
    return Seed(path, replay, state, encode_snapshot(state))


def seed_peer(config: ControllerConfig, seed: Seed) -> Path:
    """Write ``seed`` as the first Raft state of the group peer ``config`` describes (snapshot
    at :data:`SEED_INDEX`, term :data:`SEED_TERM`, no log); its raft directory. Refused when
    ``config`` is not a group's or the peer already has Raft state."""
    if len(config.peers) < 2:
        raise BolideError(f"this configuration is a lone controller's (controllerDLegerPeers="
                          f"{config.controller_dleger_peers!r}): seed the configuration of each peer "
                          "of the group, listing every peer in controllerDLegerPeers")
    peer = peer_dir(config)
    raft = peer / RAFT_DIR
    existing = state_files(raft)
    if existing:
        raise BolideError(f"controller {config.self_id} already has Raft state in {raft} "
                          f"({', '.join(p.name for p in existing)}): a seed is only for a group's "
                          "first start. To seed again, stop every peer of the group, remove each "
                          f"peer's {RAFT_DIR} directory and seed them all from the same log")
    staged = peer / STAGING
    shutil.rmtree(staged, ignore_errors=True)  # left by a seed that stopped half way
    storage = RaftStorage(staged)
    storage.open()
    try:
        storage.save_snapshot(SEED_INDEX, SEED_TERM, seed.data, [])
        storage.save_hard_state(SEED_TERM, None)
    finally:
        storage.close()
    if raft.exists():  # a peer started once and stopped before any vote: its empty log only
        (raft / "log").unlink(missing_ok=True)
        try:
            raft.rmdir()
        except OSError as exc:
            raise BolideError(f"{raft} holds files other than Raft state "
                              f"({', '.join(p.name for p in raft.iterdir())}): move them away and "
                              "seed again") from exc
    os.rename(staged, raft)
    sync_dir(peer)
    return raft


def check_store(config: ControllerConfig) -> None:
    """Before a controller reads its state: refuse a group peer without Raft state whose
    directory holds a lone controller's event log; warn of the state the other mode left."""
    peer = peer_dir(config)
    event_log, raft = peer / LOG_NAME, peer / RAFT_DIR
    lone_state = event_log.is_file() and event_log.stat().st_size > 0
    if len(config.peers) > 1:
        if lone_state and not state_files(raft):
            raise BolideError(
                f"{event_log} holds a lone controller's state, which a group does not read, and "
                f"controller {config.self_id} has no Raft state yet: before the group's first start, "
                f"stop the lone controller and seed every peer from that log (bolide controller seed "
                f"-c <each peer's controller.conf> --from {event_log}), or move the log away to "
                "start the group with no state")
        if lone_state:
            log.warning("%s is a lone controller's event log, which a group does not read (this "
                        "peer's state is in %s); move it away once the group runs", event_log, raft)
    elif state_files(raft):
        log.warning("%s holds a group's Raft state, which a lone controller does not read (its "
                    "state is %s)", raft, event_log)
