"""A controller-mode broker's identity files, as RocketMQ 5's ``BrokerMetadata`` and
``TempBrokerMetadata`` write them (so a store moves between the two):

- ``<storePathRootDir>/brokerIdentity``: ``clusterName#brokerName#brokerId``, the id the
  controller applied to this broker;
- ``brokerIdentity-temp`` beside it: ``clusterName#brokerName#brokerId#registerCheckCode``,
  the id asked for and not yet applied (the check code is ``brokerAddr;timestampMs``).

UTF-8 text with no newline. RocketMQ deletes the file and writes it anew; here the text goes to
``<file>.tmp`` first and is renamed over it, so a crash leaves the old or the new identity.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from bolide.common.config_persist import sibling, sync_dir, write_synced
from bolide.errors import ConfigError

TEMP_SUFFIX = "-temp"


@dataclass(frozen=True, slots=True)
class BrokerIdentity:
    """The applied identity (``brokerIdentity``)."""

    cluster_name: str
    broker_name: str
    broker_id: int

    def encode(self) -> str:
        return f"{self.cluster_name}#{self.broker_name}#{self.broker_id}"


@dataclass(frozen=True, slots=True)
class TempBrokerIdentity(BrokerIdentity):
    """The identity asked for (``brokerIdentity-temp``) with its register check code."""

    register_check_code: str

    def encode(self) -> str:
        return f"{BrokerIdentity.encode(self)}#{self.register_check_code}"


def _parse(path: Path, fields: int) -> list[str] | None:
    try:
        text = path.read_bytes().decode("utf-8")
    except FileNotFoundError:
        return None
    except (OSError, UnicodeDecodeError) as exc:
        raise ConfigError(f"the broker identity file {path} cannot be read ({exc}); fix or "
                          "delete it (the broker then asks the controller for a new id)") from None
    parts = text.split("#")
    # Java's split drops trailing empty strings; an empty file holds no identity
    while parts and not parts[-1]:
        parts.pop()
    if not parts:
        return None
    if len(parts) < fields or not parts[2].strip().lstrip("-").isdecimal():
        raise ConfigError(f"the broker identity file {path} holds {text!r}, not "
                          f"clusterName#brokerName#brokerId{'#checkCode' if fields > 3 else ''}; "
                          "fix or delete it (the broker then asks the controller for a new id)")
    return parts


def read_identity(path: Path) -> BrokerIdentity | None:
    """``brokerIdentity``'s identity; None when there is none; ConfigError when damaged."""
    parts = _parse(path, 3)
    if parts is None or not parts[0] or not parts[1]:
        return None
    return BrokerIdentity(parts[0], parts[1], int(parts[2]))


def read_temp_identity(path: Path) -> TempBrokerIdentity | None:
    """``brokerIdentity-temp``'s identity; None when there is none; ConfigError when damaged."""
    parts = _parse(path, 4)
    if parts is None or not parts[0] or not parts[1] or not parts[3]:
        return None
    return TempBrokerIdentity(parts[0], parts[1], int(parts[2]), parts[3])


def write_identity(path: Path, identity: BrokerIdentity) -> None:
    """Replace the file at ``path`` with ``identity`` (durably; OSError on failure)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = sibling(path, ".tmp")
    write_synced(tmp, identity.encode().encode("utf-8"))
    os.replace(tmp, path)
    sync_dir(path.parent)


def remove_identity(path: Path) -> None:
    """Delete the file at ``path`` (nothing when there is none)."""
    try:
        path.unlink()
    except FileNotFoundError:
        return
    sync_dir(path.parent)


def temp_path(path: Path) -> Path:
    """``brokerIdentity-temp`` beside ``path``."""
    return sibling(path, TEMP_SUFFIX)
