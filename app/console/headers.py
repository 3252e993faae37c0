"""Headers on every console response: what a browser may load, frame, sniff and keep.

- Content-Security-Policy: scripts, styles and images from this origin only (no inline script
  or style: they live in app/console/static), forms post only here, no plugin, no <base>, and
  no site may frame a console page (`frame-ancestors 'none'`, with X-Frame-Options DENY for
  browsers that predate it): a clickjacking page cannot put the erase button under a click.
- X-Content-Type-Options nosniff: a response is only ever what its Content-Type says.
- Cache-Control no-store: memories, users and form tokens stay out of the browser's cache and
  any proxy's, and the back button after log out shows nothing.
- Referrer-Policy same-origin: user ids in console URLs never leave for another site.
"""

from __future__ import annotations

from litestar.types import ASGIApp, Message, Receive, Scope, Send

CONTENT_SECURITY_POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; "
    "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
HEADERS: tuple[tuple[bytes, bytes], ...] = (
    (b"content-security-policy", CONTENT_SECURITY_POLICY.encode()),
    (b"x-frame-options", b"DENY"),
    (b"x-content-type-options", b"nosniff"),
    (b"cache-control", b"no-store"),
    (b"referrer-policy", b"same-origin"),
)
_NAMES = {name for name, _ in HEADERS}


def console_headers(app: ASGIApp) -> ASGIApp:
    """Middleware of the console's controllers: every answer of theirs (pages, redirects, error
    pages, assets) gets HEADERS, replacing any header of the same name."""

    async def with_headers(scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                kept = [(k, v) for k, v in message.get("headers", []) if k.lower() not in _NAMES]
                message["headers"] = [*kept, *HEADERS]
            await send(message)

        await app(scope, receive, send_with_headers)

    return with_headers
