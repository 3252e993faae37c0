"""A webhook URL's check (SSRF): its host resolved, every address refused that is loopback,
private, link-local, unspecified, multicast or reserved, unless the operator allows them
(COGNIS_WEBHOOK_ALLOW_PRIVATE). Checked at creation; see docs/webhooks.md for what that does
not cover (a DNS answer that changes later)."""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

import anyio.to_thread


class WebhookUrlRefused(ValueError):
    """The URL cannot be a webhook receiver; the message says why."""


def _refused(address: str) -> str | None:
    ip = ipaddress.ip_address(address.split("%", 1)[0])
    if isinstance(ip, ipaddress.IPv6Address) and ip.ipv4_mapped is not None:
        ip = ip.ipv4_mapped
    for flag in ("is_loopback", "is_private", "is_link_local", "is_unspecified"):
        if getattr(ip, flag):
            return flag.removeprefix("is_").replace("_", "-")
    if ip.is_multicast or ip.is_reserved:
        return "reserved"
    return None


async def check_url(url: str, *, allow_private: bool) -> None:
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise WebhookUrlRefused(f"url must be an http or https URL with a host, not {url!r}")
    if parts.username or parts.password:
        raise WebhookUrlRefused("url must not carry credentials: sign with the secret instead")
    if allow_private:
        return
    host = parts.hostname
    try:
        infos = await anyio.to_thread.run_sync(
            lambda: socket.getaddrinfo(host, parts.port or 443, proto=socket.IPPROTO_TCP)
        )
    except (socket.gaierror, UnicodeError) as exc:
        raise WebhookUrlRefused(f"the url's host {host!r} does not resolve: {exc}") from exc
    for info in infos:
        address = str(info[4][0])
        why = _refused(address)
        if why is not None:
            raise WebhookUrlRefused(
                f"the url's host {host!r} resolves to {address}, a {why} address: webhooks "
                "reach public addresses only unless the operator sets "
                "COGNIS_WEBHOOK_ALLOW_PRIVATE=true"
            )
