"""A webhook URL's check (SSRF): its host resolved, every address refused that is not
globally reachable (IANA's special-purpose registries, not only loopback and private: the
carrier-grade NAT range, 192.0.0.0/24, site-local IPv6...), and the IPv4 address carried
inside an IPv6 one (IPv4-mapped, 6to4, NAT64, Teredo) checked as well, unless the operator
allows them (COGNIS_WEBHOOK_ALLOW_PRIVATE). Checked at creation and again at each delivery's
connection (app/webhooks/transport.py), so a DNS answer that changes later is caught."""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import SplitResult, urlsplit

import anyio.to_thread

IpAddress = ipaddress.IPv4Address | ipaddress.IPv6Address


class WebhookUrlRefused(ValueError):
    """The URL cannot be a webhook receiver; the message says why."""


# Not globally reachable, by IANA's special-purpose address registries. Python's own
# `is_global` misses some of them before 3.12.4 (192.0.0.0/24, fec0::/10), so they are listed.
_NON_GLOBAL_V4 = tuple(
    ipaddress.IPv4Network(n)
    for n in (
        "0.0.0.0/8",  # "this network"
        "10.0.0.0/8",
        "100.64.0.0/10",  # carrier-grade NAT, pod networks, a cloud's metadata (100.100.100.200)
        "127.0.0.0/8",
        "169.254.0.0/16",
        "172.16.0.0/12",
        "192.0.0.0/24",  # IETF protocol assignments
        "192.0.2.0/24",
        "192.88.99.0/24",  # 6to4 relay anycast (deprecated)
        "192.168.0.0/16",
        "198.18.0.0/15",  # benchmarking
        "198.51.100.0/24",
        "203.0.113.0/24",
        "224.0.0.0/4",  # multicast
        "240.0.0.0/4",  # reserved, and the broadcast address
    )
)
_NON_GLOBAL_V6 = tuple(
    ipaddress.IPv6Network(n)
    for n in (
        "::/96",  # unspecified, loopback and the deprecated IPv4-compatible form
        "64:ff9b:1::/48",  # local-use NAT64
        "100::/64",  # discard-only
        "2001::/23",  # IETF protocol assignments, Teredo among them
        "2001:db8::/32",
        "3fff::/20",  # documentation
        "5f00::/16",  # segment routing
        "fc00::/7",  # unique local
        "fe80::/10",  # link-local
        "fec0::/10",  # site-local (deprecated, still routed on some networks)
        "ff00::/8",  # multicast
    )
)
_NAT64 = ipaddress.IPv6Network("64:ff9b::/96")


def _embedded_ipv4(ip: ipaddress.IPv6Address) -> list[ipaddress.IPv4Address]:
    """The IPv4 addresses an IPv6 address reaches through a translation or a tunnel."""
    found = []
    if ip.ipv4_mapped is not None:
        found.append(ip.ipv4_mapped)
    if ip.sixtofour is not None:
        found.append(ip.sixtofour)
    if ip.teredo is not None:
        found.extend(ip.teredo)
    if ip in _NAT64:
        found.append(ipaddress.IPv4Address(int(ip) & 0xFFFFFFFF))
    return found


def _kind(ip: IpAddress) -> str | None:
    """Why one address (no embedding looked at) is not global, or None."""
    for flag in ("is_loopback", "is_private", "is_link_local", "is_unspecified", "is_multicast"):
        if getattr(ip, flag):
            return flag.removeprefix("is_").replace("_", "-")
    table = _NON_GLOBAL_V4 if isinstance(ip, ipaddress.IPv4Address) else _NON_GLOBAL_V6
    if not ip.is_global or any(ip in network for network in table):
        return "non-global"
    if isinstance(ip, ipaddress.IPv4Address) and ip.is_reserved:
        return "reserved"
    return None


def refusal(address: str) -> str | None:
    """Why a resolved address cannot receive webhooks ('loopback', 'non-global', 'private
    (6to4 of 127.0.0.1)'...), or None for a globally reachable one."""
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    why = _kind(ip)
    if why is not None:
        return why
    if isinstance(ip, ipaddress.IPv6Address):
        for inner in _embedded_ipv4(ip):
            inner_why = _kind(inner)
            if inner_why is not None:
                return f"{inner_why} (it carries {inner})"
    return None


def _split(url: str) -> tuple[SplitResult, int]:
    """The URL's parts and its port, or WebhookUrlRefused for one that cannot be parsed."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError as exc:  # a port out of range, a broken IPv6 literal
        raise WebhookUrlRefused(f"url {url!r} cannot be parsed: {exc}") from exc
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise WebhookUrlRefused(f"url must be an http or https URL with a host, not {url!r}")
    if port == 0:
        raise WebhookUrlRefused("url's port must be between 1 and 65535, not 0")
    return parts, port or (443 if parts.scheme == "https" else 80)


async def global_addresses(host: str, port: int) -> list[str]:
    """The host's addresses, resolved now, all of them globally reachable; WebhookUrlRefused
    when the host does not resolve or any address is not global (a name that answers one
    public and one internal address is refused, whichever a connection would pick)."""
    try:
        infos = await anyio.to_thread.run_sync(
            lambda: socket.getaddrinfo(host, port, proto=socket.IPPROTO_TCP)
        )
    except (socket.gaierror, UnicodeError) as exc:
        raise WebhookUrlRefused(f"the url's host {host!r} does not resolve: {exc}") from exc
    addresses = list(dict.fromkeys(str(info[4][0]) for info in infos))
    for address in addresses:
        why = refusal(address)
        if why is not None:
            raise WebhookUrlRefused(
                f"the url's host {host!r} resolves to {address}, a {why} address: webhooks "
                "reach globally reachable addresses only unless the operator sets "
                "COGNIS_WEBHOOK_ALLOW_PRIVATE=true"
            )
    return addresses


async def check_url(url: str, *, allow_private: bool) -> None:
    parts, port = _split(url)
    if parts.username or parts.password:
        raise WebhookUrlRefused("url must not carry credentials: sign with the secret instead")
    if allow_private:
        return
    assert parts.hostname is not None  # _split refused a URL without one
    await global_addresses(parts.hostname, port)
