"""TLS for remoting and gRPC connections, as RocketMQ offers it.

A server's mode (RocketMQ's ``tls.server.mode``): ``disabled`` serves plain TCP only;
``permissive`` looks at the first byte a client sends and starts TLS when it begins a TLS
handshake (0x16), plain TCP otherwise; ``enforcing`` closes connections that do not start
with TLS. There is no negotiation in the protocol: a client that wants TLS (Java
``-Dtls.enable=true``, Go ``WithTls``, :class:`bolide.client.ClientConfig` ``use_tls``)
starts its handshake at once.

The keys are RocketMQ's (``tls.server.mode``, ``tls.server.certPath``, ``tls.server.keyPath``,
``tls.server.keyPassword``, ``tls.server.need.client.auth``, ``tls.server.trustCertPath``),
read from ``broker.conf`` / ``namesrv.conf`` or from the properties file ``tls.config.file``
names. RocketMQ's default mode is ``permissive``; with the mode not set, Bolide's remoting ports
are ``disabled`` (RocketMQ's remoting clients speak plain TCP unless told otherwise) and its gRPC
port ``permissive`` (RocketMQ 5's gRPC clients start TLS unless told otherwise). A server with
TLS on and no ``certPath`` / ``keyPath`` uses a self-signed certificate made at start
(:mod:`bolide.remoting.selfsigned`), as RocketMQ does in its test mode.
"""

from __future__ import annotations

import dataclasses
import enum
import ssl
from dataclasses import dataclass
from pathlib import Path

from bolide.common.config_file import PropertiesConfig, config_field, known_values, parse_properties
from bolide.errors import ConfigError
from bolide.remoting.selfsigned import load_into, self_signed, unencrypted_key

TLS_HANDSHAKE = 0x16  # the first byte of a TLS record carrying a handshake


class TlsMode(enum.Enum):
    DISABLED = "disabled"
    PERMISSIVE = "permissive"
    ENFORCING = "enforcing"


_CLIENT_AUTH = {"none": ssl.CERT_NONE, "optional": ssl.CERT_OPTIONAL, "require": ssl.CERT_REQUIRED}


@dataclass(frozen=True, slots=True)
class TlsServerConfig(PropertiesConfig):
    """A server's TLS settings (RocketMQ's ``tls.server.*`` keys, and ``tls.client.*`` for the
    server's own connections)."""

    mode: str = config_field("tls.server.mode", "")  # "": not set (see tls_mode, grpc_mode)
    cert_path: str = config_field("tls.server.certPath", "")
    key_path: str = config_field("tls.server.keyPath", "")
    key_password: str = config_field("tls.server.keyPassword", "")
    need_client_auth: str = config_field("tls.server.need.client.auth", "none")
    trust_cert_path: str = config_field("tls.server.trustCertPath", "")
    # the server's own connections (a broker's to NameServers and other brokers, with useTLS)
    client_cert_path: str = config_field("tls.client.certPath", "")
    client_key_path: str = config_field("tls.client.keyPath", "")
    client_trust_cert_path: str = config_field("tls.client.trustCertPath", "")
    config_file: str = config_field("tls.config.file", "")

    def __post_init__(self) -> None:
        if self.mode and self.mode not in {m.value for m in TlsMode}:
            raise ConfigError(f"tls.server.mode={self.mode}: use disabled, permissive or enforcing")
        if self.need_client_auth not in _CLIENT_AUTH:
            raise ConfigError(f"tls.server.need.client.auth={self.need_client_auth}: use none, "
                              "optional or require")

    @property
    def tls_mode(self) -> TlsMode:
        """The remoting ports' mode: ``disabled`` when not set."""
        return TlsMode(self.mode or TlsMode.DISABLED.value)

    @property
    def grpc_mode(self) -> TlsMode:
        """The gRPC port's mode: ``permissive`` when not set (RocketMQ's default), so the 5.x
        clients' TLS default and plain clients both connect."""
        return TlsMode(self.mode or TlsMode.PERMISSIVE.value)

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

    def check_pair(self) -> None:
        """ConfigError unless ``certPath`` and ``keyPath`` are both set or both not."""
        if bool(self.cert_path) != bool(self.key_path):
            raise ConfigError("tls.server.certPath and tls.server.keyPath go together (a PEM "
                              "certificate and its private key): set both, or neither for a "
                              "self-signed certificate")

    def key_and_cert(self) -> tuple[bytes, bytes] | None:
        """``(key PEM, certificate PEM)`` of ``certPath`` / ``keyPath`` (the key decrypted with
        ``keyPassword``), or None when neither is set (a self-signed one is then used)."""
        cfg = self.resolved()
        if not cfg.cert_path and not cfg.key_path:
            return None
        cfg.check_pair()
        try:
            key, cert = Path(cfg.key_path).read_bytes(), Path(cfg.cert_path).read_bytes()
        except OSError as exc:
            raise ConfigError(f"cannot read the TLS key or certificate: {exc}") from None
        if cfg.key_password:
            try:
                key = unencrypted_key(key, cfg.key_password)
            except (ValueError, TypeError) as exc:
                raise ConfigError(f"cannot decrypt the TLS key {cfg.key_path} with "
                                  f"tls.server.keyPassword: {exc}") from None
        return key, cert

    def required_client_roots(self) -> bytes | None:
        """With ``tls.server.need.client.auth=require``: the CA certificates (PEM) clients'
        certificates must chain to, read from ``trustCertPath``; None otherwise. ConfigError
        when it is not set or cannot be read."""
        cfg = self.resolved()
        if cfg.need_client_auth != "require":
            return None
        if not cfg.trust_cert_path:
            raise ConfigError("tls.server.need.client.auth=require on the gRPC port needs "
                              "tls.server.trustCertPath: set it to the PEM file of the CA that "
                              "signs the clients' certificates")
        try:
            return Path(cfg.trust_cert_path).read_bytes()
        except OSError as exc:
            raise ConfigError(f"cannot read tls.server.trustCertPath={cfg.trust_cert_path}: "
                              f"{exc.strerror or exc}") from None

    def outbound_context(self) -> ssl.SSLContext:
        """The SSL context of the server's own TLS connections: presenting the
        ``tls.client.certPath`` / ``keyPath`` certificate when set (to servers that require
        client certificates), checking the peer against ``tls.client.trustCertPath`` when set."""
        cfg = self.resolved()
        if bool(cfg.client_cert_path) != bool(cfg.client_key_path):
            raise ConfigError("tls.client.certPath and tls.client.keyPath go together (a PEM "
                              "certificate and its private key): set both, or neither")
        return client_context(cfg.client_trust_cert_path or None, cfg.client_cert_path or None,
                              cfg.client_key_path or None)

    def server_context(self) -> ssl.SSLContext | None:
        """The SSL context a remoting server accepts TLS with; None when its mode is
        ``disabled``. Without ``certPath`` / ``keyPath``, a self-signed certificate."""
        cfg = self.resolved()
        if cfg.tls_mode is TlsMode.DISABLED:
            return None
        context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        try:
            if cfg.cert_path or cfg.key_path:
                cfg.check_pair()
                context.load_cert_chain(cfg.cert_path, cfg.key_path, cfg.key_password or None)
            else:
                load_into(context, *self_signed())
            context.verify_mode = _CLIENT_AUTH[cfg.need_client_auth]
            if cfg.trust_cert_path:
                context.load_verify_locations(cfg.trust_cert_path)
        except (OSError, ssl.SSLError) as exc:
            raise ConfigError(f"cannot load the TLS certificate {cfg.cert_path} and key "
                              f"{cfg.key_path}: {exc}") from None
        return context


def client_context(ca_file: str | None = None, cert_file: str | None = None,
                   key_file: str | None = None) -> ssl.SSLContext:
    """The SSL context of a client: the server's certificate is checked against ``ca_file``
    when given, else not checked at all (RocketMQ clients' default ``tls.test.mode.enable``);
    with ``cert_file`` and ``key_file`` (PEM) the client presents that certificate, for servers
    that require one (``tls.server.need.client.auth``). ConfigError when a file cannot be read."""
    try:
        if ca_file:
            context = ssl.create_default_context(cafile=ca_file)
            context.check_hostname = False  # brokers are addressed by IP, as registered
        else:
            context = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
            context.check_hostname = False
            context.verify_mode = ssl.CERT_NONE
        if cert_file or key_file:
            context.load_cert_chain(cert_file or "", key_file or None)
    except (OSError, ssl.SSLError) as exc:
        raise ConfigError(f"cannot load the client's TLS files (CA {ca_file}, certificate "
                          f"{cert_file}, key {key_file}): {exc}") from None
    return context
