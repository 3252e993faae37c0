"""The dispatcher's HTTP transport: every connection's host resolved at connect time, refused
unless all its addresses are globally reachable (app/webhooks/urls.py), and the socket opened
to an address that was checked. A receiver whose DNS answer turns to an internal address
after it subscribed (DNS rebinding) is never reached: the POST fails with a ConnectError
that names the address, recorded as the attempt's error."""

from __future__ import annotations

import typing

import anyio
import httpcore
import httpx

from app.webhooks.urls import WebhookUrlRefused, global_addresses


class GlobalAddressesOnly(httpcore.AsyncNetworkBackend):
    """httpcore's network backend with the address check between resolving and connecting;
    TLS then runs on the connected socket with the URL's host name (SNI and certificate)."""

    def __init__(self) -> None:
        self._inner = httpcore.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        local_address: str | None = None,
        socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        try:
            with anyio.fail_after(timeout):
                addresses = await global_addresses(host, port)
        except WebhookUrlRefused as exc:
            raise httpcore.ConnectError(str(exc)) from exc
        except TimeoutError as exc:
            raise httpcore.ConnectTimeout(f"resolving {host!r} took over {timeout} s") from exc
        last: Exception | None = None
        for address in addresses:
            try:
                return await self._inner.connect_tcp(
                    address, port, timeout, local_address, socket_options
                )
            except (httpcore.ConnectError, httpcore.ConnectTimeout) as exc:
                last = exc
        assert last is not None  # global_addresses returns at least one address
        raise last

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,  # noqa: ASYNC109 (httpcore's interface)
        socket_options: typing.Iterable[httpcore.SOCKET_OPTION] | None = None,
    ) -> httpcore.AsyncNetworkStream:
        raise httpcore.ConnectError("webhooks are delivered over TCP only")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class GlobalOnlyTransport(httpx.AsyncHTTPTransport):
    """httpx's transport on a pool whose connections go through GlobalAddressesOnly. No proxy
    from the environment: the check is about the receiver's address, not a proxy's."""

    def __init__(self, limits: httpx.Limits) -> None:
        super().__init__(trust_env=False, limits=limits)
        # httpx builds its pool without a way to pass a network backend; the pool it built
        # is replaced by the same one with the checking backend.
        self._pool = httpcore.AsyncConnectionPool(
            ssl_context=httpx.create_ssl_context(),
            max_connections=limits.max_connections,
            max_keepalive_connections=limits.max_keepalive_connections,
            keepalive_expiry=limits.keepalive_expiry,
            network_backend=GlobalAddressesOnly(),
        )


def webhook_client(*, timeout_s: float, allow_private: bool) -> httpx.AsyncClient:
    """The dispatcher's client: redirects never followed, and (unless the operator allows
    private receivers) every connection's address checked when it is opened."""
    limits = httpx.Limits(max_connections=100, max_keepalive_connections=20)
    transport = None if allow_private else GlobalOnlyTransport(limits)
    return httpx.AsyncClient(
        timeout=timeout_s, follow_redirects=False, transport=transport, limits=limits
    )
