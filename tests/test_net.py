import ipaddress
import re
import socket

import pytest

from omniroute.core.net import BlockedURL, check_base_url


@pytest.mark.parametrize(
    "url",
    [
        "https://api.openai.com/v1",
        "http://93.184.216.34:8080/v1",
        "https://[2606:4700::1111]/v1",
    ],
)
def test_public_http_urls_pass(url):
    assert check_base_url(url + "/", allow_local=False, resolve=False) == url


@pytest.mark.parametrize(
    ("url", "reason"),
    [
        ("file:///etc/passwd", "only http"),
        ("ftp://example.com", "only http"),
        ("http://user:secret@example.com/v1", "credentials"),
        ("https://example.com/v1?key=abc", "query"),
        ("https://example.com/v1#frag", "query string or fragment"),
        ("http:///v1", "no host"),
        ("http://example.com:99999/v1", "port"),
        ("http://[0]/v1", "not a URL"),
        ("http://[/v1", "not a URL"),
    ],
)
def test_malformed_or_unsafe_urls_are_refused(url, reason):
    with pytest.raises(BlockedURL, match=reason):
        check_base_url(url, allow_local=True, resolve=False)


@pytest.mark.parametrize(
    "url",
    [
        "http://169.254.169.254/latest",
        "http://169.254.1.1/",
        "http://metadata.google.internal/",
        "http://100.100.100.200/",
        "http://[fd00:ec2::254]/",
        "http://[::ffff:169.254.169.254]/",
    ],
)
def test_cloud_metadata_is_refused_even_when_local_urls_are_allowed(url):
    with pytest.raises(BlockedURL, match="metadata"):
        check_base_url(url, allow_local=True, resolve=False)


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:11434/v1",
        "http://localhost:11434/v1",
        "http://10.1.2.3/v1",
        "http://192.168.1.10/v1",
        "http://172.16.0.1/v1",
        "http://100.64.0.1/v1",
        "http://[::1]:8000/v1",
        "http://[fc00::1]/v1",
        "http://0.0.0.0/v1",
        "http://ollama.local/v1",
        "http://box.internal/v1",
    ],
)
def test_local_addresses_pass_only_when_allowed(url):
    assert check_base_url(url, allow_local=True, resolve=False)
    with pytest.raises(BlockedURL, match="local"):
        check_base_url(url, allow_local=False, resolve=False)


def test_names_are_resolved_and_each_address_checked():
    # The machine's own name passes the name rules; only its resolved address is local.
    host = socket.gethostname()
    addresses = {ipaddress.ip_address(info[4][0]) for info in socket.getaddrinfo(host, None)}
    if not all(a.is_private or a.is_loopback for a in addresses):
        pytest.skip(f"{host} resolves to a public address here")
    assert check_base_url(f"http://{host}:1/v1", allow_local=True)
    with pytest.raises(BlockedURL, match="local address"):
        check_base_url(f"http://{host}:1/v1", allow_local=False)


def test_a_name_that_does_not_resolve_is_refused_when_resolving():
    with pytest.raises(BlockedURL, match="does not resolve"):
        check_base_url("http://no-such-host.invalid/v1", allow_local=True)


@pytest.mark.parametrize(
    ("host", "address"),
    [("127.1", "127.0.0.1"), ("0x7f000001", "127.0.0.1"), ("017700000001", "127.0.0.1"),
     ("0177.0.0.1", "127.0.0.1"), ("10.1", "10.0.0.1"), ("2130706433", "127.0.0.1")],
)  # fmt: skip
def test_addresses_in_the_resolvers_other_spellings_are_checked_without_a_lookup(host, address):
    with pytest.raises(BlockedURL, match=rf"\({re.escape(address)}\) is a local address"):
        check_base_url(f"http://{host}:8080/v1", allow_local=False, resolve=False)
    assert check_base_url(f"http://{host}:8080/v1", allow_local=True, resolve=False)


def test_the_metadata_address_in_hex_is_refused():
    with pytest.raises(BlockedURL, match="metadata"):
        check_base_url("http://0xa9fea9fe/", allow_local=True, resolve=False)


def test_a_host_name_dns_cannot_spell_is_refused_not_a_crash():
    with pytest.raises(BlockedURL, match="not a valid host name"):
        check_base_url("http://u\x92\u0100x:6333", allow_local=True)
