"""The console's session, over HTTP against the real API process: the cookie holds a session
secret that is no API key, the table holds no usable key, logging out or expiry ends the session
on the server, and every console answer carries the browser-side protections (CSP, no framing,
no sniffing, no caching)."""

from __future__ import annotations

import hashlib
import re

import httpx
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from app.console.headers import CONTENT_SECURITY_POLICY
from app.console.pages import COOKIE
from tests.conftest import API_KEY
from tests.console.test_console_csrf import form_token, logged_in

PROTECTIONS = {
    "content-security-policy": CONTENT_SECURITY_POLICY,
    "x-frame-options": "DENY",
    "x-content-type-options": "nosniff",
    "cache-control": "no-store",
}


def _session_id(secret: str) -> bytes:
    return hashlib.sha256(b"cognis-console-session:" + secret.encode()).digest()


async def _row(owner: AsyncEngine, secret: str) -> tuple[bytes, str] | None:
    async with owner.connect() as connection:
        row = (
            await connection.execute(
                text(
                    "SELECT sealed_key, (expires_at - created_at)::text FROM console_sessions "
                    "WHERE id = :id"
                ),
                {"id": _session_id(secret)},
            )
        ).first()
    return None if row is None else (bytes(row[0]), row[1])


async def test_the_cookie_and_the_table_hold_no_api_key(
    browser_like: httpx.AsyncClient, api_client: httpx.AsyncClient, owner: AsyncEngine
) -> None:
    await logged_in(browser_like)
    secret = browser_like.cookies.get(COOKIE)
    assert secret and API_KEY not in secret
    # The cookie is no key of the API.
    refused = await api_client.get("/v1/users", headers={"X-API-Key": secret})
    assert refused.status_code == 401, refused.text
    # The table has the session (12 hours), its key sealed: not there in clear.
    row = await _row(owner, secret)
    assert row is not None
    sealed, lifetime = row
    assert lifetime == "12:00:00"
    assert API_KEY.encode() not in sealed and secret.encode() not in sealed
    # Each login is a session of its own.
    asked = await browser_like.get("/console/logout")
    await browser_like.post("/console/logout", data={"csrf": form_token(asked)})
    await logged_in(browser_like)
    assert browser_like.cookies.get(COOKIE) not in (None, secret)


async def test_log_out_ends_the_session_on_the_server(
    browser_like: httpx.AsyncClient, owner: AsyncEngine
) -> None:
    token = await logged_in(browser_like)
    secret = browser_like.cookies.get(COOKIE)
    out = await browser_like.post("/console/logout", data={"csrf": token})
    assert out.status_code == 303
    assert await _row(owner, secret) is None
    # A copy of the old cookie (kept by an attacker, another tab) opens nothing any more.
    replayed = await browser_like.get("/console/outbox", cookies={COOKIE: secret})
    assert replayed.headers["location"] == "/console/login"


async def test_an_expired_or_altered_session_logs_in_again(
    browser_like: httpx.AsyncClient, owner: AsyncEngine
) -> None:
    await logged_in(browser_like)
    secret = browser_like.cookies.get(COOKIE)
    assert (await browser_like.get("/console/outbox")).status_code == 200
    async with owner.begin() as connection:  # one byte of the sealed key altered
        await connection.execute(
            text(
                "UPDATE console_sessions SET sealed_key = overlay(sealed_key PLACING '\\xff' "
                "FROM 20) WHERE id = :id"
            ),
            {"id": _session_id(secret)},
        )
    assert (await browser_like.get("/console/outbox")).headers["location"] == "/console/login"

    await logged_in(browser_like)
    secret = browser_like.cookies.get(COOKIE)
    async with owner.begin() as connection:
        await connection.execute(
            text(
                "UPDATE console_sessions SET expires_at = now() - interval '1 second' "
                "WHERE id = :id"
            ),
            {"id": _session_id(secret)},
        )
    assert (await browser_like.get("/console/outbox")).headers["location"] == "/console/login"


async def test_every_console_answer_carries_the_protections(
    browser_like: httpx.AsyncClient, user_id: str
) -> None:
    answers = {
        "login page": await browser_like.get("/console/login"),
        "to login": await browser_like.get("/console/outbox"),
        "stylesheet": await browser_like.get("/console/static/console.css"),
        "script": await browser_like.get("/console/static/console.js"),
        "no such asset": await browser_like.get("/console/static/pages.py"),
    }
    token = await logged_in(browser_like)
    answers["users"] = await browser_like.get("/console")
    answers["memories"] = await browser_like.get(f"/console/users/{user_id}")
    answers["forged form"] = await browser_like.post("/console/logout", data={"csrf": "forged"})
    answers["log out"] = await browser_like.post("/console/logout", data={"csrf": token})
    for name, answer in answers.items():
        for header, value in PROTECTIONS.items():
            assert answer.headers.get(header) == value, (name, header, answer.headers)
    assert answers["forged form"].status_code == 403
    assert answers["no such asset"].status_code == 404
    assert answers["stylesheet"].headers["content-type"].startswith("text/css")
    assert answers["script"].headers["content-type"].startswith("text/javascript")
    # The pages need nothing the policy forbids: no inline script, style or event handler.
    for name in ("login page", "users", "memories"):
        html = answers[name].text
        assert re.findall(r"<script(?![^>]*\bsrc=)[^>]*>", html) == [], name
        assert "<style" not in html and " style=" not in html, name
        assert re.findall(r"\son[a-z]+=", html) == [], name
    # The REST API is not the console: its answers keep their own headers.
    api_answer = await browser_like.get("/health")
    assert "content-security-policy" not in api_answer.headers
