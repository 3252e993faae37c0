"""Logging in to the console (a form whose token pairs with a pre-session cookie, against
login CSRF) and its static assets, the pages open before a session."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from cognis_client import CognisError
from litestar import Controller, Request, Response, get, post
from litestar.exceptions import (
    NotFoundException,
)
from litestar.response import Redirect

from app.console import csrf, sessions
from app.console.headers import console_headers
from app.console.responses import Form, console_cookie, render, session_cookie

STATIC = Path(__file__).parent / "static"
ASSETS = {"console.css": "text/css; charset=utf-8", "console.js": "text/javascript; charset=utf-8"}


def _login_form(request: Request, status_code: int = 200, **context: Any) -> Response[str]:
    """The login page; its form's token pairs with the pre-session cookie (set here if absent)."""
    nonce = request.cookies.get(csrf.LOGIN_COOKIE)
    cookies = []
    if not nonce:
        nonce = csrf.new_nonce()
        cookies.append(console_cookie(request, csrf.LOGIN_COOKIE, nonce))
    response = render("login.html", status_code, login_token=csrf.login_token(nonce), **context)
    response.cookies.extend(cookies)
    return response


class ConsoleLogin(Controller):
    path = "/console"
    include_in_schema = False
    middleware = [console_headers]

    @get("/static/{name:str}")
    async def asset(self, name: str) -> Response[bytes]:
        """The console's stylesheet and script (files, so the CSP allows nothing inline)."""
        if name not in ASSETS:
            raise NotFoundException(f"no console asset {name!r}")
        return Response((STATIC / name).read_bytes(), media_type=ASSETS[name])

    @get("/login")
    async def login_form(self, request: Request) -> Response[str]:
        return _login_form(request)

    @post("/login")
    async def log_in(
        self,
        request: Request,
        data: Form,
    ) -> Response[Any]:
        nonce = request.cookies.get(csrf.LOGIN_COOKIE)
        if not csrf.accepted(data.get(csrf.FIELD), csrf.login_token(nonce) if nonce else None):
            # A form from another site (login CSRF) or a stale one: no cookie is set or changed.
            error = CognisError(
                403,
                "Log in refused",
                "This login form did not come from this console's login page (or that page "
                "has expired): nobody was logged in. Open the login page and log in there.",
                {},
            )
            return render("error.html", 403, error=error, path=request.url.path)
        key = data.get("key", "").strip()
        runtime = request.app.state.runtime
        if not key or await runtime.keys.tenant_of(key) is None:
            return _login_form(request, 401, error="That key is not accepted.")
        lifetime_s = runtime.settings.api.console_session_hours * 3600
        secret = await sessions.open_session(runtime.sessionmaker, key, lifetime_s)
        # The pre-session cookie is spent: the session's own token takes over.
        return Redirect(
            "/console",
            status_code=303,
            cookies=[
                session_cookie(request, secret, max_age=int(lifetime_s)),
                console_cookie(request, csrf.LOGIN_COOKIE, "", 0),
            ],
        )
