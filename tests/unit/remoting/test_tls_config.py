"""TLS settings: the modes of the remoting and gRPC ports when ``tls.server.mode`` is not set,
the self-signed certificate made when none is configured (checked by a real TLS handshake in
memory), and a configured key's password."""

from __future__ import annotations

import ipaddress
import ssl
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric import ec

from bolide.errors import ConfigError
from bolide.remoting.selfsigned import self_signed
from bolide.remoting.tls import TlsMode, TlsServerConfig

TLS_DIR = Path(__file__).resolve().parents[2] / "data" / "tls"
CERT, KEY = TLS_DIR / "server.crt", TLS_DIR / "server.key"


def test_unset_the_remoting_ports_are_plain_and_the_grpc_port_permissive() -> None:
    unset = TlsServerConfig()
    assert (unset.tls_mode, unset.grpc_mode) == (TlsMode.DISABLED, TlsMode.PERMISSIVE)
    assert unset.server_context() is None  # no certificate made for plain remoting ports
    for mode in TlsMode:
        config = TlsServerConfig(mode=mode.value)
        assert config.tls_mode is mode and config.grpc_mode is mode
    with pytest.raises(ConfigError, match="use disabled, permissive or enforcing"):
        TlsServerConfig(mode="on")


def handshake(server: ssl.SSLContext, client: ssl.SSLContext) -> ssl.SSLObject:
    """A TLS handshake between the two contexts over memory buffers; the client's end."""
    c_in, c_out, s_in, s_out = ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO(), ssl.MemoryBIO()
    c = client.wrap_bio(c_in, c_out, server_hostname="127.0.0.1")
    s = server.wrap_bio(s_in, s_out, server_side=True)
    done = {"c": False, "s": False}
    for _ in range(10):
        for name, end in (("c", c), ("s", s)):
            try:
                end.do_handshake()
                done[name] = True
            except ssl.SSLWantReadError:
                pass
        s_in.write(c_out.read())
        c_in.write(s_out.read())
        if all(done.values()):
            return c
    raise AssertionError("no handshake")


def test_without_a_certificate_a_self_signed_one_serves_tls() -> None:
    key_pem, cert_pem = self_signed()
    assert self_signed() == (key_pem, cert_pem)  # one per process
    cert = x509.load_pem_x509_certificate(cert_pem)
    key = serialization.load_pem_private_key(key_pem, None)
    assert isinstance(key, ec.EllipticCurvePrivateKey) and key.curve.name == "secp256r1"
    assert cert.subject == cert.issuer
    names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert ipaddress.ip_address("127.0.0.1") in names.get_values_for_type(x509.IPAddress)
    server = TlsServerConfig(mode="permissive").server_context()
    assert server is not None
    client = ssl.create_default_context(cadata=cert_pem.decode())  # checks it, name and all
    assert handshake(server, client).getpeercert()["subject"] == ((("commonName", "bolide"),),)


def test_a_configured_certificate_and_its_key_password(tmp_path: Path) -> None:
    assert TlsServerConfig().key_and_cert() is None
    assert TlsServerConfig(cert_path=str(CERT), key_path=str(KEY)).key_and_cert() == (
        KEY.read_bytes(), CERT.read_bytes())
    with pytest.raises(ConfigError, match=r"tls\.server\.certPath and tls\.server\.keyPath go together"):
        TlsServerConfig(mode="permissive", cert_path=str(CERT)).server_context()
    with pytest.raises(ConfigError, match="go together"):
        TlsServerConfig(key_path=str(KEY)).key_and_cert()
    with pytest.raises(ConfigError, match="cannot read the TLS key"):
        TlsServerConfig(cert_path=str(CERT), key_path=str(tmp_path / "none.key")).key_and_cert()
    key = serialization.load_pem_private_key(KEY.read_bytes(), None)
    encrypted = tmp_path / "encrypted.key"
    encrypted.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                            serialization.BestAvailableEncryption(b"s3cret")))
    config = TlsServerConfig(cert_path=str(CERT), key_path=str(encrypted), key_password="s3cret")
    pair = config.key_and_cert()
    assert pair is not None and b"ENCRYPTED" not in pair[0]
    plain = serialization.load_pem_private_key(pair[0], None)
    assert plain.private_numbers() == key.private_numbers()  # type: ignore[union-attr]
    unencrypted = TlsServerConfig(cert_path=str(CERT), key_path=str(KEY), key_password="s3cret")
    assert unencrypted.key_and_cert() == (KEY.read_bytes(), CERT.read_bytes())  # taken as it is
    with pytest.raises(ConfigError, match=r"tls\.server\.keyPassword"):
        TlsServerConfig(cert_path=str(CERT), key_path=str(encrypted), key_password="wrong").key_and_cert()
