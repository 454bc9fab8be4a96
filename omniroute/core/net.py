"""The one guard every outbound URL goes through (providers, memory backends, Qdrant).

http(s) only; no credentials, query or fragment in the URL; cloud metadata addresses always
refused; loopback, private and link-local addresses refused unless local URLs are allowed
(they are by default, so that local servers such as Ollama work). Host names are resolved and
every address they resolve to is checked; `pin_base_url` also says which checked address to
connect to, so that a second lookup at connect time (DNS rebinding) cannot send the request
elsewhere. Callers must not follow redirects.
"""

from __future__ import annotations

import functools
import ipaddress
import re
import socket
import ssl
from dataclasses import dataclass
from urllib.parse import SplitResult, urlsplit

import httpx

METADATA_HOSTS = frozenset(
    {"metadata.google.internal", "metadata.goog", "metadata", "instance-data"}
)
METADATA_ADDRESSES = frozenset(
    ipaddress.ip_address(a) for a in ("169.254.169.254", "100.100.100.200", "fd00:ec2::254")
)
LINK_LOCAL_V4 = ipaddress.ip_network("169.254.0.0/16")
SHARED_V4 = ipaddress.ip_network("100.64.0.0/10")
LEGACY_V4 = re.compile(r"[0-9a-fx.]+")
LOCAL_SUFFIXES = (".localhost", ".local", ".internal", ".lan", ".home.arpa")

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

# The URLs the guard can read, as regular expressions for schemas and so for the OpenAPI spec
# (a client, or a fuzzer, sees what is accepted): a host name in ASCII (an international one
# in its xn-- form), an IPv4 address or a bracketed IPv6 one, an optional port, a path without
# spaces, controls, query or fragment. Where the URL points is the guard's own judgement.
_HEX4 = "[0-9A-Fa-f]{1,4}"
_IPV6_SHORT = f"(?:{_HEX4}(?::{_HEX4}){{0,2}})?::(?:{_HEX4}(?::{_HEX4}){{0,2}})?"
HOST_PATTERN = (
    rf"(?:[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)*\.?|\[(?:(?:{_HEX4}:){{7}}{_HEX4}|{_IPV6_SHORT})\])"
)
PORT_PATTERN = (
    "(?::(?:6553[0-5]|655[0-2][0-9]|65[0-4][0-9]{2}|6[0-4][0-9]{3}|[1-5][0-9]{4}|[0-9]{1,4}))?"
)
PATH_PATTERN = r"(?:/[^\x00-\x20\x7f?#]*)?"
HTTP_URL_PATTERN = f"^https?://{HOST_PATTERN}{PORT_PATTERN}{PATH_PATTERN}$"
URL_SHAPE = (
    "an http:// or https:// URL: a host (an international name in its xn-- form), an "
    "optional port and path, no query or fragment"
)


class BlockedURL(ValueError):
    """The URL may not be used for an outbound request; the message says why."""


@dataclass(frozen=True)
class PinnedURL:
    """A checked base URL and the checked address to reach it at."""

    base_url: str  # as given, without a trailing slash
    host: str  # the name to send as Host and to verify TLS against
    connect_url: str  # base_url with the host replaced by the checked address

    @property
    def is_https(self) -> bool:
        return self.base_url.startswith("https:")

    def request(
        self, http: httpx.Client, method: str, path: str, *, headers=None, **options
    ) -> httpx.Request:
        """A request to `{base_url}{path}` sent to the checked address: the name goes as Host
        and, over https, as the TLS server name. Send it without following redirects."""
        sni = urlsplit(self.base_url).hostname if self.is_https else None
        return http.build_request(
            method,
            f"{self.connect_url}{path}",
            headers={"Host": self.host, **(headers or {})},
            extensions={"sni_hostname": sni} if sni else None,
            **options,
        )


def check_base_url(url: str, *, allow_local: bool, resolve: bool = True) -> str:
    """Validate an outbound base URL; return it without a trailing slash.

    With `resolve`, the host name is looked up and each address it resolves to is checked;
    a name that does not resolve is refused. Without it only the URL itself is checked
    (used when a provider is saved: its host may come up later).
    """
    clean, _, _, _ = _checked(url, allow_local, resolve)
    return clean


def pin_base_url(url: str, *, allow_local: bool) -> PinnedURL:
    """Validate an outbound base URL (resolving it), and pin it to the first checked address."""
    clean, parts, host, addresses = _checked(url, allow_local, resolve=True)
    address = addresses[0]
    literal = f"[{address}]" if isinstance(address, ipaddress.IPv6Address) else str(address)
    netloc = f"{literal}:{parts.port}" if parts.port is not None else literal
    connect = parts._replace(netloc=netloc).geturl().rstrip("/")
    return PinnedURL(base_url=clean, host=parts.netloc, connect_url=connect)


def _checked(
    url: str, allow_local: bool, resolve: bool
) -> tuple[str, SplitResult, str, list[Address]]:
    if any(ord(char) < 0x21 or ord(char) == 0x7F for char in url.strip()):
        raise BlockedURL("control characters and spaces are not allowed in a URL")
    try:
        parts = urlsplit(url.strip())
    except ValueError as exc:  # a bracketed host that is no IPv6 address: "http://[0]"
        raise BlockedURL(f"not a URL: {exc}") from None
    if parts.scheme not in ("http", "https"):
        raise BlockedURL("only http:// and https:// URLs are allowed")
    if parts.username is not None or parts.password is not None:
        raise BlockedURL("credentials are not allowed in the URL; use the apiKey field")
    if parts.query or parts.fragment:
        raise BlockedURL("a query string or fragment is not allowed in a base URL")
    try:
        _ = parts.port
    except ValueError:
        raise BlockedURL("the port is not a number between 0 and 65535") from None
    host = (parts.hostname or "").rstrip(".").lower()
    if not host:
        raise BlockedURL("the URL has no host")
    _check_name(host, allow_local)
    addresses = _addresses(host, resolve)
    for address in addresses:
        _check_address(address, allow_local, host)
    return url.strip().rstrip("/"), parts, host, addresses


def _check_name(host: str, allow_local: bool) -> None:
    if host in METADATA_HOSTS:
        raise BlockedURL(f"{host} is a cloud metadata service")
    if not allow_local and (host == "localhost" or host.endswith(LOCAL_SUFFIXES)):
        raise BlockedURL(f"{host} is a local name and local URLs are not allowed")


def _addresses(host: str, resolve: bool) -> list[Address]:
    try:
        return [ipaddress.ip_address(host)]
    except ValueError:
        pass
    if (legacy := _legacy_ipv4(host)) is not None:
        return [legacy]
    if not resolve:
        return []
    try:
        infos = socket.getaddrinfo(host, None, proto=socket.IPPROTO_TCP)
    except UnicodeError:  # the name cannot be spelled for DNS at all
        raise BlockedURL(f"{host!r} is not a valid host name") from None
    except OSError as exc:
        raise BlockedURL(f"{host} does not resolve: {exc}") from None
    return [ipaddress.ip_address(info[4][0].split("%")[0]) for info in infos]


def _legacy_ipv4(host: str) -> ipaddress.IPv4Address | None:
    """An address written as the C resolver also reads it (`127.1`, `0x7f000001`,
    `017700000001`), which `ipaddress` does not take: checked without a lookup too."""
    if not LEGACY_V4.fullmatch(host):
        return None
    try:
        return ipaddress.IPv4Address(socket.inet_aton(host))
    except OSError:
        return None


def _check_address(address: Address, allow_local: bool, host: str) -> None:
    if isinstance(address, ipaddress.IPv6Address) and address.ipv4_mapped is not None:
        address = address.ipv4_mapped
    if address in METADATA_ADDRESSES or (
        isinstance(address, ipaddress.IPv4Address) and address in LINK_LOCAL_V4
    ):
        raise BlockedURL(f"{host} ({address}) is a cloud metadata address")
    local = (
        address.is_loopback
        or address.is_private
        or address.is_link_local
        or address.is_unspecified
        or address.is_reserved
        or (isinstance(address, ipaddress.IPv4Address) and address in SHARED_V4)
    )
    if local and not allow_local:
        raise BlockedURL(f"{host} ({address}) is a local address and local URLs are not allowed")


@functools.cache
def tls_context() -> ssl.SSLContext:
    """The verifying TLS context every outbound client of the process shares (httpx's
    default: certifi's roots). Loading the roots is most of what making a client costs."""
    return httpx.create_ssl_context()
