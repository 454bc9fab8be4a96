"""ProviderClient: the one way out to a provider, against a real loopback server."""

from __future__ import annotations

import json
import socket
import ssl
import threading
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import urlsplit

import httpx
import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from omniroute.core.providers.client import (
    BAD_RESPONSE,
    HTTP_ERROR,
    NO_KEY,
    RATE_LIMITED,
    REFUSED,
    TIMEOUT,
    UNREACHABLE,
    ProviderClient,
    ProviderError,
)
from omniroute.core.providers.registry import Provider


@pytest.fixture
def client():
    http = httpx.Client(follow_redirects=False, timeout=5)
    yield ProviderClient(http, allow_local=True)
    http.close()


@pytest.fixture
def provider(upstream) -> Provider:
    return Provider(id="up", base_url=upstream.base_url, api_key="sk-up-1234")


def test_a_call_sends_json_with_the_providers_key_and_returns_the_answer(
    client, provider, upstream
):
    answer = client.post_json(provider, "/embeddings", {"model": "e", "input": ["hi"]})
    assert len(answer["data"]) == 1
    sent = upstream.requests[-1]
    assert sent["path"] == "/v1/embeddings"
    assert sent["headers"]["Authorization"] == "Bearer sk-up-1234"
    assert sent["headers"]["Content-Type"] == "application/json"


def test_a_provider_without_a_key_sends_no_authorization(client, upstream):
    keyless = Provider(id="up", base_url=upstream.base_url)
    client.post_json(keyless, "/embeddings", {"model": "e", "input": ["hi"]})
    assert "Authorization" not in upstream.requests[-1]["headers"]


@pytest.mark.parametrize(
    ("path", "model", "kind", "status"),
    [
        ("/embeddings", "fail-401", NO_KEY, 401),
        ("/embeddings", "fail-429", RATE_LIMITED, 429),
        ("/rerank", "fail-500", HTTP_ERROR, 500),
        ("/text", "m", BAD_RESPONSE, 200),
        ("/moved", "m", HTTP_ERROR, 307),
    ],
)
def test_each_failure_has_its_kind(client, provider, upstream, path, model, kind, status):
    with pytest.raises(ProviderError) as caught:
        client.post_json(provider, path, {"model": model, "input": ["x"], "documents": ["x"]})
    assert (caught.value.kind, caught.value.status) == (kind, status)
    assert caught.value.message.startswith("Provider up ")


def test_a_redirect_is_never_followed(client, provider, upstream):
    response = client.open(provider, "/moved", {"model": "m"})
    response.close()
    assert response.status_code == 307
    assert [r["path"] for r in upstream.requests] == ["/v1/moved"]


def test_a_slow_provider_is_a_timeout(client, provider, upstream):
    upstream.slow_seconds = 1.0
    with pytest.raises(ProviderError) as caught:
        client.post_json(provider, "/embeddings", {"model": "slow", "input": ["x"]}, timeout=0.2)
    assert caught.value.kind == TIMEOUT and "did not answer in time" in caught.value.message


def test_a_refused_connection_is_unreachable(client):
    down = Provider(id="down", base_url="http://127.0.0.1:1/v1")
    with pytest.raises(ProviderError) as caught:
        client.post_json(down, "/embeddings", {})
    assert caught.value.kind == UNREACHABLE
    assert "Could not reach provider down" in caught.value.message


@pytest.mark.parametrize(
    ("base_url", "allow_local"),
    [
        ("http://169.254.169.254/v1", True),  # metadata: always refused
        ("http://metadata.google.internal/v1", True),
        ("http://127.0.0.1:9/v1", False),  # local, and local is not allowed
        ("file:///etc/passwd", True),
    ],
)
def test_the_url_guard_refuses_before_anything_is_sent(base_url, allow_local):
    with httpx.Client() as http:
        guarded = ProviderClient(http, allow_local=allow_local)
        with pytest.raises(ProviderError) as caught:
            guarded.open(Provider(id="p", base_url=base_url), "/chat/completions", {})
    assert caught.value.kind == REFUSED and "URL is refused" in caught.value.message


def test_the_connection_goes_to_the_checked_address_not_a_second_lookup(upstream, monkeypatch):
    # DNS rebinding: the guard's lookup says loopback (allowed here), a second lookup at
    # connect time would say 127.0.0.2, where nothing listens. Only the checked address may be
    # used, with the name kept as Host.
    real = socket.getaddrinfo
    answers = iter(["127.0.0.1", "127.0.0.2", "127.0.0.2"])
    lookups = []

    def rebinding(host, *args, **kwargs):
        if host != "rebind.test":
            return real(host, *args, **kwargs)
        lookups.append(host)
        address = next(answers)
        return [(socket.AF_INET, socket.SOCK_STREAM, 6, "", (address, 0))]

    monkeypatch.setattr(socket, "getaddrinfo", rebinding)
    port = urlsplit(upstream.base_url).port
    provider = Provider(id="rb", base_url=f"http://rebind.test:{port}/v1", api_key="k")
    with httpx.Client(follow_redirects=False) as http:
        answer = ProviderClient(http, allow_local=True).post_json(
            provider, "/embeddings", {"model": "e", "input": ["x"]}
        )
    assert len(answer["data"]) == 1
    assert lookups == ["rebind.test"], "one lookup: the guard's"
    assert upstream.requests[-1]["headers"]["Host"] == f"rebind.test:{port}"


def test_over_tls_the_pinned_connection_still_verifies_the_name(tmp_path, monkeypatch):
    # The URL goes to the checked address, but TLS must still check the certificate against
    # the provider's name (sent as SNI), or pinning would break every https provider.
    cert, key = self_signed(tmp_path, "secure.test")
    server = ThreadingHTTPServer(("127.0.0.1", 0), EchoHost)
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(cert, key)
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    real = socket.getaddrinfo
    monkeypatch.setattr(
        socket,
        "getaddrinfo",
        lambda host, *a, **k: (
            [(socket.AF_INET, socket.SOCK_STREAM, 6, "", ("127.0.0.1", 0))]
            if host == "secure.test"
            else real(host, *a, **k)
        ),
    )
    port = server.server_address[1]
    provider = Provider(id="tls", base_url=f"https://secure.test:{port}/v1")
    try:
        with httpx.Client(verify=ssl.create_default_context(cafile=str(cert))) as http:
            answer = ProviderClient(http, allow_local=True).post_json(provider, "/echo", {})
    finally:
        server.shutdown()
        server.server_close()
    assert answer == {"host": f"secure.test:{port}"}


class EchoHost(BaseHTTPRequestHandler):
    def log_message(self, *args) -> None:
        pass

    def do_POST(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        body = json.dumps({"host": self.headers["Host"]}).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)


def self_signed(folder, name: str):
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, name)])
    now = datetime.now(UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - timedelta(minutes=1))
        .not_valid_after(now + timedelta(hours=1))
        .add_extension(x509.SubjectAlternativeName([x509.DNSName(name)]), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.PKCS8,
            serialization.NoEncryption(),
        )
    )
    return cert_path, key_path
