"""The client verifies a cluster's certificate, with one TLS context shared by its clients.

A real TLS server on loopback, with a self-signed certificate no CA vouches for: every client
of the process refuses it, the second as the first (the shared context still verifies).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import ipaddress
import json
import ssl
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID
from pydantic import SecretStr

from connectors.contact_center import ClientSettings, ContactCenterClient
from connectors.contact_center.core import tls_context
from connectors.contact_center.errors import TransportFailure

BALANCE = {"balance": "12.50", "currency": "EUR"}


def _self_signed(directory: Path) -> tuple[Path, Path]:
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "cdrhouse test cluster")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(hours=1))
        .not_valid_after(now + dt.timedelta(hours=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]),
            critical=False,
        )
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path


class _Balance(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        body = json.dumps(BALANCE).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def tls_server(tmp_path: Path) -> Iterator[tuple[str, Path]]:
    cert, key = _self_signed(tmp_path)
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Balance)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"https://127.0.0.1:{server.server_address[1]}", cert
    finally:
        server.shutdown()
        server.server_close()


async def _balance(base_url: str) -> object:
    settings = ClientSettings(base_url=base_url, api_key=SecretStr("k"), max_attempts=1)
    async with ContactCenterClient(settings) as client:
        return await client.get_balance()


def test_every_client_refuses_an_unknown_certificate_with_the_one_context(
    tls_server: tuple[str, Path],
) -> None:
    url, _ = tls_server
    for _ in range(2):
        with pytest.raises(TransportFailure) as caught:
            asyncio.run(_balance(url))
        assert "CERTIFICATE_VERIFY_FAILED" in repr(caught.value.__cause__ or caught.value), (
            caught.value
        )
    assert tls_context() is tls_context()
    assert tls_context().verify_mode == ssl.CERT_REQUIRED
    assert tls_context().check_hostname
