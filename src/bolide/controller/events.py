"""The events that change the controller's replicas state (RocketMQ's controller event types)
and their JSON form in the event log. Pure values, no I/O."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from bolide.errors import ProtocolError


@dataclass(frozen=True, slots=True)
class ApplyBrokerId:
    """A broker took ``broker_id`` in its group (the group is created by its first broker)."""

    cluster_name: str
    broker_name: str
    broker_address: str
    broker_id: int
    register_check_code: str


@dataclass(frozen=True, slots=True)
class UpdateBrokerAddress:
    """A registered broker came back on another address."""

    cluster_name: str
    broker_name: str
    broker_address: str
    broker_id: int


@dataclass(frozen=True, slots=True)
class ElectMaster:
    """``new_master`` leads the group with syncStateSet ``{new_master}`` (master epoch and set
    epoch + 1); None: the group has no master (master epoch + 1)."""

    broker_name: str
    new_master: int | None


@dataclass(frozen=True, slots=True)
class AlterSyncStateSet:
    """The master reported a new in-sync set (set epoch + 1)."""

    broker_name: str
    sync_state_set: frozenset[int]


@dataclass(frozen=True, slots=True)
class CleanBrokerData:
    """Forget ``broker_ids`` of a group, or the whole group when None."""

    broker_name: str
    broker_ids: frozenset[int] | None


@dataclass(frozen=True, slots=True)
class Snapshot:
    """The whole state at once (compacted log): ``groups`` as :meth:`ReplicasState.to_json`."""

    groups: list[dict[str, Any]]


Event = ApplyBrokerId | UpdateBrokerAddress | ElectMaster | AlterSyncStateSet | CleanBrokerData | Snapshot

_TYPES: dict[str, type] = {"APPLY_BROKER_ID": ApplyBrokerId, "UPDATE_BROKER_ADDRESS": UpdateBrokerAddress,
                           "ELECT_MASTER": ElectMaster, "ALTER_SYNC_STATE_SET": AlterSyncStateSet,
                           "CLEAN_BROKER_DATA": CleanBrokerData, "SNAPSHOT": Snapshot}
_NAMES = {t: name for name, t in _TYPES.items()}


def event_to_json(event: Event) -> dict[str, Any]:
    out: dict[str, Any] = {"type": _NAMES[type(event)]}
    for name in event.__slots__:  # type: ignore[union-attr]
        value = getattr(event, name)
        out[name] = sorted(value) if isinstance(value, frozenset) else value
    return out


def event_from_json(obj: Any) -> Event:
    """Rebuild an event; ProtocolError when ``obj`` is not one."""
    try:
        cls: Any = _TYPES[obj["type"]]
        values = {name: obj[name] for name in cls.__slots__}
    except (KeyError, TypeError):
        raise ProtocolError(f"not a controller event: {str(obj)[:80]}") from None
    for name in ("sync_state_set", "broker_ids"):
        if name in values and values[name] is not None:
            values[name] = frozenset(int(v) for v in values[name])
    event: Event = cls(**values)
    return event
