"""Client settings shared by producers and consumers, and the client id."""

from __future__ import annotations

import dataclasses
import os
import time
from dataclasses import dataclass

from bolide.client.errors import ClientConfigError
from bolide.common.hosts import local_ip


@dataclass(frozen=True, slots=True)
class ClientConfig:
    """What every client needs: NameServer addresses, timeouts and the Java client's timers.

    ``namesrv_addr`` is ``"host:port"`` or several joined by ``;`` (as RocketMQ writes it).
    ``instance_name`` defaults to ``<pid>#<nanos>``, so the client id is ``ip@pid#nanos`` like
    the Java client's. ``access_key`` and ``secret_key`` (and ``security_token``) sign every
    request for a broker with RocketMQ's plain ACL on (``aclEnable=true``), as the Java
    client's AclClientRPCHook does. ``use_tls`` connects to NameServers and brokers over TLS
    (servers with ``tls.server.mode`` permissive or enforcing), checking their certificate
    against ``tls_ca_file`` when given, else not checking it (the Java client's default test
    mode), and presenting ``tls_cert_file`` / ``tls_key_file`` to servers that require a client
    certificate. ``enable_trace`` makes producers and push consumers write message traces to
    ``trace_topic`` (default ``RMQ_SYS_TRACE_TOPIC``), as the Java client's ``enableTrace``
    (:mod:`bolide.client.tracing`).
    """

    namesrv_addr: str
    instance_name: str | None = None
    client_ip: str | None = None
    api_timeout_ms: int = 3000
    poll_name_server_interval_ms: int = 30_000
    heartbeat_broker_interval_ms: int = 30_000
    access_key: str | None = None
    secret_key: str | None = dataclasses.field(default=None, repr=False)
    security_token: str | None = dataclasses.field(default=None, repr=False)
    use_tls: bool = False
    tls_ca_file: str | None = None
    tls_cert_file: str | None = None
    tls_key_file: str | None = None
    enable_trace: bool = False
    trace_topic: str | None = None

    def __post_init__(self) -> None:
        if not self.namesrv_addrs:
            raise ClientConfigError("namesrv_addr is empty: give the NameServer as host:port "
                                    "(several separated by ';')")
        for name in ("api_timeout_ms", "poll_name_server_interval_ms", "heartbeat_broker_interval_ms"):
            if getattr(self, name) <= 0:
                raise ClientConfigError(f"{name} must be positive, not {getattr(self, name)}")
        if bool(self.access_key) != bool(self.secret_key):
            raise ClientConfigError("give both access_key and secret_key (an account of the broker's "
                                    "plain_acl.yml), or neither")
        if (self.tls_ca_file or self.tls_cert_file or self.tls_key_file) and not self.use_tls:
            raise ClientConfigError("TLS files are set but use_tls is not: set use_tls=True to "
                                    "connect over TLS")
        if bool(self.tls_cert_file) != bool(self.tls_key_file):
            raise ClientConfigError("give both tls_cert_file and tls_key_file (the client's PEM "
                                    "certificate and key), or neither")

    @property
    def namesrv_addrs(self) -> list[str]:
        """The NameServer addresses, one per entry of ``namesrv_addr``."""
        return [a.strip() for a in self.namesrv_addr.split(";") if a.strip()]

    def replace(self, **changes: object) -> ClientConfig:
        """A copy with ``changes`` (field names as keywords)."""
        return dataclasses.replace(self, **changes)  # type: ignore[arg-type]

    def make_client_id(self) -> str:
        """``ip@instanceName``; the default instance name is ``pid#nanos`` (unique per client)."""
        instance = self.instance_name or f"{os.getpid()}#{time.monotonic_ns()}"
        return f"{self.client_ip or local_ip()}@{instance}"


def as_config(namesrv: str | ClientConfig) -> ClientConfig:
    """A ClientConfig from an address string or a config."""
    if isinstance(namesrv, ClientConfig):
        return namesrv
    if not isinstance(namesrv, str):
        raise ClientConfigError(f"namesrv must be 'host:port' or a ClientConfig, not {namesrv!r}")
    return ClientConfig(namesrv_addr=namesrv)
