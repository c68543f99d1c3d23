"""TLS for remoting connections, as RocketMQ offers it.

A server's mode (RocketMQ's ``tls.server.mode``): ``disabled`` serves plain TCP only;
``permissive`` looks at the first byte a client sends and starts TLS when it begins a TLS
handshake (0x16), plain TCP otherwise; ``enforcing`` closes connections that do not start
with TLS. There is no negotiation in the protocol: a client that wants TLS (Java
``-Dtls.enable=true``, Go ``WithTls``, :class:`bolide.client.ClientConfig` ``use_tls``)
starts its handshake at once.

The keys are RocketMQ's (``tls.server.mode``, ``tls.server.certPath``, ``tls.server.keyPath``,
``tls.server.keyPassword``, ``tls.server.need.client.auth``, ``tls.server.trustCertPath``),
read from ``broker.conf`` / ``namesrv.conf`` or from the properties file ``tls.config.file``
names. Unlike RocketMQ, which makes itself a certificate when it has none, a Bolide server
needs ``certPath`` and ``keyPath`` for any mode but ``disabled`` (its default).
"""

from __future__ import annotations

import dataclasses
import enum
import ssl
from dataclasses import dataclass
from pathlib import Path

from bolide.common.config_file import PropertiesConfig, config_field, known_values, parse_properties
from bolide.errors import ConfigError

TLS_HANDSHAKE = 0x16  # the first byte of a TLS record carrying a handshake


class TlsMode(enum.Enum):
    DISABLED = "disabled"
    PERMISSIVE = "permissive"
    ENFORCING = "enforcing"


_CLIENT_AUTH = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL, "require": ssl.CERT_REQUIRED}


@dataclass(frozen=True, slots=True)
class TlsServerConfig(PropertiesConfig):
    """A server's TLS settings (RocketMQ's ``tls.server.*`` keys)."""

    mode: str = config_field("tls.server.mode", "disabled")
    cert_path: str = config_field("tls.server.certPath", "")
    key_path: str = config_field("tls.server.keyPath", "")
    key_password: str = config_field("tls.server.keyPassword", "")
    need_client_auth: str = config_field("tls.server.need.client.auth", "none")
    trust_cert_path: str = config_field("tls.server.trustCertPath", "")
    config_file: str = config_field("tls.config.file", "")

    def __post_init__(self) -> None:
        if self.mode not in {m.value for m in TlsMode}:
            raise ConfigError(f"tls.server.mode={self.mode}: use disabled, permissive or enforcing")
        if self.need_client_auth not in _CLIENT_AUTH:
            raise ConfigError(f"tls.server.need.client.auth={self.need_client_auth}: use none, "
                              "optional or require")

    @property
    def tls_mode(self) -> TlsMode:
        return TlsMode(self.mode)

    def resolved(self) -> TlsServerConfig:
        """These settings with those of ``tls.config.file`` (a RocketMQ tls.properties) over
        them."""
        if not self.config_file:
            return self
        path = Path(self.config_file)
        try:
            props = parse_properties(path.read_text())
        except OSError as exc:
            raise ConfigError(f"tls.config.file={path}: {exc.strerror or exc}") from None
        return dataclasses.replace(self, **known_values(TlsServerConfig, props), config_file="")

    def server_context(self) -> ssl.SSLContext | None:
        """The SSL context a server accepts TLS with; None when the mode is ``disabled``."""
        cfg = self.resolved()
        if cfg.tls_mode is TlsMode.DISABLED:
            return None
        if not cfg.cert_path or not cfg.key_path:
            raise ConfigError(f"tls.server.mode={cfg.mode} needs tls.server.certPath and "
                              "tls.server.keyPath (a PEM certificate and its private key)")
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        try:
            context.load_cert_chain(cfg.cert_path, cfg.key_path, cfg.key_password or None)
            context.verify_mode = _CLIENT_AUTH[cfg.need_client_auth]
            if cfg.trust_cert_path:
                context.load_verify_locations(cfg.trust_cert_path)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"cannot load the TLS certificate {cfg.cert_path} and key "
                              f"{cfg.key_path}: {exc}") from None
        return context


def client_context(ca_file: str | None = None) -> ssl.SSLContext:
    """The SSL context of a client: the server's certificate is checked against ``ca_file``
    when given, else not checked at all (RocketMQ clients' default ``tls.test.mode.enable``)."""
    if ca_file:
        context = ssl.create_default_context(cafile=ca_file)
        context.check_hostname = False  # brokers are addressed by IP, as registered
        return context
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    context.check_hostname = False
    context.verify_mode = ssl.CERT_NONE
    return context
