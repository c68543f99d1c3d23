"""The plain-ACL files of a broker: accounts and white lists read from ``plain_acl.yml`` and the
``acl/`` directory beside it (RocketMQ's ``conf/plain_acl.yml`` and ``conf/acl/*.yml``), reread
when they change, and rewritten by the ACL admin requests.

:attr:`PlainAcl.state` is an immutable snapshot; a reload or an update swaps it whole, so a
request is always checked against one consistent set of accounts.
"""

from __future__ import annotations

import logging
import os
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from bolide.broker.acl.addresses import AddressPattern, compile_pattern
from bolide.broker.acl.permissions import check_resource_perms, parse_perm, parse_resource_perms
from bolide.common.config_persist import write_atomic
from bolide.errors import ConfigError
from bolide.protocol.bodies.admin import BrokerClusterAclConfig, PlainAccessConfig
from bolide.protocol.bodies.broker import DataVersion

log = logging.getLogger(__name__)

KEY_MIN_LENGTH = 6  # keys must be longer than this (RocketMQ's AclConstants)
ACCOUNTS = "accounts"
GLOBAL_WHITE = "globalWhiteRemoteAddresses"
DATA_VERSION = "dataVersion"


@dataclass(frozen=True, slots=True)
class Account:
    """One account: its secret, the addresses that skip its checks, its permissions."""

    access_key: str
    secret_key: str
    white: AddressPattern
    admin: bool
    default_topic_perm: int
    default_group_perm: int
    perms: Mapping[str, int]  # topic, or %RETRY%group -> bits; empty when none is listed
    source: Path


@dataclass(frozen=True, slots=True)
class AclState:
    """Everything the checks read, as loaded from the files at one moment."""

    accounts: Mapping[str, Account] = field(default_factory=dict)
    global_white: tuple[AddressPattern, ...] = ()
    configs: tuple[PlainAccessConfig, ...] = ()  # as written, for GET_BROKER_CLUSTER_ACL_CONFIG
    global_white_texts: tuple[str, ...] = ()
    versions: Mapping[str, DataVersion] = field(default_factory=dict)  # by file path


def _text(value: Any) -> str | None:
    """A YAML scalar as the string Java's binding makes of it (``12345678`` -> "12345678")."""
    if value is None:
        return None
    if isinstance(value, bool):
        return "true" if value else "false"
    return str(value)


def _texts(value: Any, what: str, where: Path) -> list[str] | None:
    if value is None:
        return None
    if not isinstance(value, list):
        raise ConfigError(f"{where}: {what} must be a list (one '- item' per line), not {value!r}")
    return [t for t in (_text(v) for v in value) if t is not None]


def access_config(raw: Any, where: Path) -> PlainAccessConfig:
    """One entry of ``accounts`` as a PlainAccessConfig; ConfigError when it is not a mapping."""
    if not isinstance(raw, dict):
        raise ConfigError(f"{where}: each entry of accounts must be a mapping with accessKey, "
                          f"secretKey, ...; found {raw!r}")
    admin = raw.get("admin")
    return PlainAccessConfig(
        access_key=_text(raw.get("accessKey")), secret_key=_text(raw.get("secretKey")),
        white_remote_address=_text(raw.get("whiteRemoteAddress")),
        admin=admin is True or _text(admin) == "true",
        default_topic_perm=_text(raw.get("defaultTopicPerm")),
        default_group_perm=_text(raw.get("defaultGroupPerm")),
        topic_perms=_texts(raw.get("topicPerms"), "topicPerms", where),
        group_perms=_texts(raw.get("groupPerms"), "groupPerms", where))


def check_keys(config: PlainAccessConfig) -> None:
    """Both keys present and longer than six characters, as RocketMQ demands."""
    ak, sk = config.access_key, config.secret_key
    if ak is None or sk is None or len(ak) <= KEY_MIN_LENGTH or len(sk) <= KEY_MIN_LENGTH:
        raise ConfigError(f"The accessKey={ak} and secretKey={sk} cannot be null and length "
                          "should longer than 6")


def build_account(config: PlainAccessConfig, source: Path) -> Account:
    """The checked form of an account; ConfigError naming what is wrong."""
    check_keys(config)
    assert config.access_key is not None and config.secret_key is not None
    perms = parse_resource_perms(config.group_perms, groups=True)
    perms.update(parse_resource_perms(config.topic_perms, groups=False))
    return Account(config.access_key, config.secret_key,
                   compile_pattern(config.white_remote_address), config.admin,
                   parse_perm(config.default_topic_perm), parse_perm(config.default_group_perm),
                   perms, source)


def read_yaml(path: Path) -> dict[str, Any]:
    """The mapping a YAML file holds ({} for an empty file); ConfigError naming the file."""
    try:
        with open(path, "rb") as f:
            data = yaml.safe_load(f)
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path} is not valid YAML ({exc}); fix it or restore it from "
                          f"{path.name}.bak") from None
    except OSError as exc:
        raise ConfigError(f"cannot read the ACL file {path}: {exc.strerror or exc}") from None
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path} must hold a mapping (globalWhiteRemoteAddresses, accounts), "
                          f"not {type(data).__name__}")
    return data


def _version(data: Mapping[str, Any]) -> DataVersion:
    versions = data.get(DATA_VERSION)
    if isinstance(versions, list) and versions and isinstance(versions[0], dict):
        first = versions[0]
        try:
            return DataVersion(timestamp=int(first.get("timestamp", 0)),
                               counter=int(first.get("counter", 0)))
        except (TypeError, ValueError):
            pass
    return DataVersion(timestamp=int(time.time() * 1000), counter=0)


class PlainAcl:
    """The ACL files of a broker (``main_file`` and ``acl/`` beside it) and their snapshot."""

    def __init__(self, main_file: Path) -> None:
        self.main_file = Path(os.path.abspath(main_file))
        self.acl_dir = self.main_file.parent / "acl"
        self._signature: tuple[tuple[str, int, int], ...] = ()
        self._lock = threading.RLock()  # loads and writes run in worker threads
        self.state = AclState()

    # -- reading ------------------------------------------------------------------------------
    def files(self) -> list[Path]:
        """The ACL files: ``*.yml`` / ``*.yaml`` under ``acl/`` (recursively), then the main
        file."""
        found = sorted(p for p in self.acl_dir.rglob("*") if p.suffix in (".yml", ".yaml")
                       and p.is_file()) if self.acl_dir.is_dir() else []
        if self.main_file.is_file() and self.main_file not in found:
            found.append(self.main_file)
        return found

    def _current_signature(self) -> tuple[tuple[str, int, int], ...]:
        sig = []
        for path in self.files():
            try:
                st = path.stat()
            except FileNotFoundError:
                continue
            sig.append((str(path), st.st_mtime_ns, st.st_size))
        return tuple(sig)

    def load(self) -> AclState:
        """Read every file and swap the snapshot; ConfigError (the old one stays) when a file
        or an account in it is wrong."""
        with self._lock:
            return self._load()

    def _load(self) -> AclState:
        signature = self._current_signature()
        accounts: dict[str, Account] = {}
        configs: list[PlainAccessConfig] = []
        white: list[AddressPattern] = []
        white_texts: list[str] = []
        versions: dict[str, DataVersion] = {}
        for path in (Path(s[0]) for s in signature):
            data = read_yaml(path)
            for text in _texts(data.get(GLOBAL_WHITE), GLOBAL_WHITE, path) or ():
                white.append(compile_pattern(text))
                white_texts.append(text)
            for raw in _texts_or_maps(data.get(ACCOUNTS), path):
                config = access_config(raw, path)
                try:
                    account = build_account(config, path)
                except ConfigError as exc:
                    raise ConfigError(f"{path}: {exc}") from None
                if account.access_key in accounts:
                    log.warning("ACL: accessKey %s in %s is already defined in %s: ignored",
                                account.access_key, path, accounts[account.access_key].source)
                    continue
                accounts[account.access_key] = account
                configs.append(config)
            versions[str(path)] = _version(data)
        self.state = AclState(accounts, tuple(white), tuple(configs), tuple(white_texts), versions)
        self._signature = signature
        return self.state

    def reload_if_changed(self) -> bool:
        """Reload when a file was added, removed or changed since the last load; True if it
        did. A file that does not load is logged and the accounts stay as they were."""
        with self._lock:
            return self._reload_if_changed()

    def _reload_if_changed(self) -> bool:
        if self._current_signature() == self._signature:
            return False
        try:
            self._load()
        except ConfigError as exc:
            self._signature = self._current_signature()  # do not log it again every check
            log.error("ACL files changed but are not used (the accounts stay as they were): %s", exc)
            return False
        log.info("ACL files reloaded: %d accounts, %d global white addresses",
                 len(self.state.accounts), len(self.state.global_white))
        return True

    # -- what the admin requests read ---------------------------------------------------------
    def cluster_config(self) -> BrokerClusterAclConfig:
        """GET_BROKER_CLUSTER_ACL_CONFIG's answer: global white addresses and accounts."""
        return BrokerClusterAclConfig(global_white_addrs=list(self.state.global_white_texts),
                                      plain_access_configs=list(self.state.configs))

    def main_version(self) -> DataVersion:
        return self.state.versions.get(str(self.main_file)) or DataVersion(
            timestamp=int(time.time() * 1000), counter=0)

    # -- what the admin requests write --------------------------------------------------------
    def update_account(self, config: PlainAccessConfig) -> None:
        """Create or change an account (UPDATE_AND_CREATE_ACL_CONFIG): in the file that holds
        it, else appended to the main file. ConfigError when the account is not valid."""
        with self._lock:
            self._update_account(config)

    def _update_account(self, config: PlainAccessConfig) -> None:
        check_keys(config)
        check_resource_perms(config.topic_perms)
        check_resource_perms(config.group_perms)
        build_account(config, self.main_file)  # refuse what would not load
        held = self.state.accounts.get(config.access_key or "")
        path = held.source if held is not None else self.main_file
        data = read_yaml(path) if path.exists() else {}
        accounts = list(_texts_or_maps(data.get(ACCOUNTS), path))
        for i, raw in enumerate(accounts):
            if isinstance(raw, dict) and _text(raw.get("accessKey")) == config.access_key:
                accounts[i] = _merged(raw, config)
                break
        else:
            accounts.append(_merged({}, config))
        data[ACCOUNTS] = accounts
        self._write(path, data)

    def delete_account(self, access_key: str) -> bool:
        """Remove an account from its file (DELETE_ACL_CONFIG); False when there is none."""
        with self._lock:
            return self._delete_account(access_key)

    def _delete_account(self, access_key: str) -> bool:
        held = self.state.accounts.get(access_key)
        if not access_key or held is None:
            return False
        data = read_yaml(held.source)
        accounts = list(_texts_or_maps(data.get(ACCOUNTS), held.source))
        kept = [a for a in accounts if not (isinstance(a, dict)
                                            and _text(a.get("accessKey")) == access_key)]
        if len(kept) == len(accounts):
            return False
        data[ACCOUNTS] = kept
        self._write(held.source, data)
        return True

    def update_global_white(self, addresses: Iterable[str], file: str | None = None) -> None:
        """Replace the global white list of ``file`` (the main file by default) with
        ``addresses`` (UPDATE_GLOBAL_WHITE_ADDRS_CONFIG); ConfigError for a bad pattern or a
        file that is not one of the broker's ACL files."""
        with self._lock:
            self._update_global_white(addresses, file)

    def _update_global_white(self, addresses: Iterable[str], file: str | None) -> None:
        texts = [a.strip() for a in addresses if a.strip()]
        for text in texts:
            compile_pattern(text)
        path = Path(os.path.abspath(file)) if file else self.main_file
        if path != self.main_file and path not in self.files():
            raise ConfigError(f"{file} is not one of this broker's ACL files ({self.main_file} "
                              f"or a .yml file under {self.acl_dir})")
        data = read_yaml(path) if path.exists() else {}
        data[GLOBAL_WHITE] = texts
        self._write(path, data)

    def _write(self, path: Path, data: dict[str, Any]) -> None:
        """Write ``data`` with the file's next data version, then load everything again."""
        version = self.state.versions.get(str(path)) or _version(data)
        data[DATA_VERSION] = [{"counter": version.counter + 1,
                               "timestamp": int(time.time() * 1000)}]
        text = yaml.safe_dump(data, default_flow_style=False, sort_keys=False, allow_unicode=True)
        write_atomic(path, text.encode())
        self._load()


def _texts_or_maps(value: Any, where: Path) -> list[Any]:
    if value is None:
        return []
    if not isinstance(value, list):
        raise ConfigError(f"{where}: accounts must be a list of mappings ('- accessKey: ...')")
    return value


def _merged(raw: dict[str, Any], config: PlainAccessConfig) -> dict[str, Any]:
    """An account's YAML mapping with what ``config`` sets (RocketMQ's
    createAclAccessConfigMap: absent values keep the old ones)."""
    out = dict(raw)
    out["accessKey"] = config.access_key
    if config.secret_key:
        out["secretKey"] = config.secret_key
    if config.white_remote_address is not None:
        out["whiteRemoteAddress"] = config.white_remote_address
    out["admin"] = bool(config.admin)
    if config.default_topic_perm:
        out["defaultTopicPerm"] = config.default_topic_perm
    if config.default_group_perm:
        out["defaultGroupPerm"] = config.default_group_perm
    if config.topic_perms is not None:
        out["topicPerms"] = list(config.topic_perms)
    if config.group_perms is not None:
        out["groupPerms"] = list(config.group_perms)
    return out
