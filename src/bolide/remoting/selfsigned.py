"""A self-signed certificate for a TLS server that has none configured, as RocketMQ's servers
make one in their test mode (``tls.test.mode.enable``, on by default): the official clients do
not check the server's certificate unless told to.

One EC P-256 key and certificate per process, made the first time one is needed (a few
milliseconds) and held in memory; :func:`load_into` hands them to an ``ssl.SSLContext`` through
files in a private temporary directory removed at once.
"""

from __future__ import annotations

import datetime
import functools
import logging
import ssl
import tempfile
from pathlib import Path

from bolide.errors import ConfigError

log = logging.getLogger(__name__)

VALID_DAYS = 3650


@functools.cache
def self_signed() -> tuple[bytes, bytes]:
    """``(key PEM, certificate PEM)`` of this process's self-signed certificate (CN bolide, for
    localhost and 127.0.0.1; the key unencrypted PKCS#8)."""
    import ipaddress

    try:
        from cryptography import x509
        from cryptography.hazmat.primitives import hashes, serialization
        from cryptography.hazmat.primitives.asymmetric import ec
        from cryptography.x509.oid import NameOID
    except ImportError:
        raise ConfigError("TLS without tls.server.certPath and keyPath needs the cryptography "
                          "package for a self-signed certificate: pip install cryptography, "
                          "configure a certificate, or set tls.server.mode=disabled") from None

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "bolide")])
    now = datetime.datetime.now(datetime.UTC)
    names = [x509.DNSName("localhost"), x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=VALID_DAYS))
        .add_extension(x509.SubjectAlternativeName(names), critical=False)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
    log.warning(
        "TLS: no certificate configured, serving TLS with a self-signed one made at start "
        "(as RocketMQ's test mode); set tls.server.certPath and tls.server.keyPath to use your own"
    )
    return key_pem, cert.public_bytes(serialization.Encoding.PEM)


def load_into(context: ssl.SSLContext, key_pem: bytes, cert_pem: bytes) -> None:
    """``context.load_cert_chain`` of PEM bytes (it reads files only): written to a private
    temporary directory that is removed as soon as they are loaded."""
    with tempfile.TemporaryDirectory(prefix="bolide-tls-") as tmp:
        key, cert = Path(tmp) / "key.pem", Path(tmp) / "cert.pem"
        key.touch(mode=0o600)
        key.write_bytes(key_pem)
        cert.write_bytes(cert_pem)
        context.load_cert_chain(cert, key)


def unencrypted_key(key_pem: bytes, password: str) -> bytes:
    """``key_pem`` decrypted with ``password`` (``tls.server.keyPassword``), as unencrypted
    PKCS#8 PEM, which gRPC needs. Raises ValueError for a wrong password or a bad key."""
    try:
        from cryptography.hazmat.primitives import serialization
    except ImportError:
        raise ConfigError("tls.server.keyPassword needs the cryptography package for the gRPC "
                          "port: pip install cryptography, or give an unencrypted key") from None

    try:
        key = serialization.load_pem_private_key(key_pem, password.encode() or None)
    except TypeError:  # not encrypted: as it is (as ssl.SSLContext.load_cert_chain takes it)
        return key_pem
    return key.private_bytes(
        serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption()
    )
