"""The console's forms against forgery, over HTTP against the real API process: every change is
a POST that carries the session's token (a missing or wrong one: 403 and nothing changes), login
too (a cross-site login form: 403 and no cookie set), and a GET never logs out."""

from __future__ import annotations

import re

import httpx
import pytest

from app.console import csrf
from app.console.pages import COOKIE
from tests.conftest import API_KEY


def form_token(page: httpx.Response) -> str:
    found = re.search(r'name="csrf" value="([^"]+)"', page.text)
    assert found, page.text
    return found.group(1)


async def logged_in(http: httpx.AsyncClient) -> str:
    """Logs in through the login form; the session's form token."""
    token = form_token(await http.get("/console/login"))
    answer = await http.post("/console/login", data={"csrf": token, "key": API_KEY})
    assert answer.status_code == 303 and http.cookies.get(COOKIE), answer.text
    return form_token(await http.get("/console"))


@pytest.mark.parametrize("token", [None, "", "forged", "login-token"])
async def test_login_refuses_a_form_without_this_pages_token(
    browser_like: httpx.AsyncClient, token: str | None
) -> None:
    page = await browser_like.get("/console/login")
    nonce = browser_like.cookies.get(csrf.LOGIN_COOKIE)
    assert nonce and "HttpOnly" in page.headers["set-cookie"]
    assert "samesite=strict" in page.headers["set-cookie"].lower()
    form = {"key": API_KEY}
    if token == "login-token":  # the right token, but sent without the pre-session cookie
        form["csrf"] = form_token(page)
        browser_like.cookies.clear()
    elif token is not None:
        form["csrf"] = token
    refused = await browser_like.post("/console/login", data=form)
    assert refused.status_code == 403, refused.text
    assert "set-cookie" not in refused.headers
    assert "nobody was logged in" in refused.text
    assert browser_like.cookies.get(COOKIE) is None
    # Still logged out: the console sends the browser to the login page.
    assert (await browser_like.get("/console")).headers["location"] == "/console/login"


async def test_login_form_logs_in_and_swaps_cookies(browser_like: httpx.AsyncClient) -> None:
    await logged_in(browser_like)
    assert browser_like.cookies.get(csrf.LOGIN_COOKIE) is None  # the pre-session cookie is spent
    assert (await browser_like.get("/console")).status_code == 200


async def test_every_change_needs_the_sessions_token(
    browser_like: httpx.AsyncClient, api_client: httpx.AsyncClient, user_id: str
) -> None:
    token = await logged_in(browser_like)
    session = browser_like.cookies.get(COOKIE)
    assert token == csrf.session_token(session)
    memory = (
        await api_client.post(f"/v1/users/{user_id}/memories", json={"content": "Ada keeps bees."})
    ).json()
    base = f"/console/users/{user_id}"
    changes = [
        (f"{base}/memories/{memory['id']}/edit", {"content": "Ada keeps wasps."}),
        (f"{base}/memories/{memory['id']}/delete", {}),
        (f"{base}/erase", {"confirm": user_id}),
        (f"{base}/dry-run", {"content": "I keep wasps now."}),
        ("/console/logout", {}),
    ]
    for path, form in changes:
        for forged in (None, "", "0" * 64, csrf.session_token("another-key"), token.upper()):
            sent = form if forged is None else {**form, "csrf": forged}
            refused = await browser_like.post(path, data=sent)
            assert refused.status_code == 403, (path, forged, refused.text)
            assert "nothing was changed" in refused.text
            assert "set-cookie" not in refused.headers
    # Nothing changed: the memory is as written, the user is there, the session still open.
    history = (await api_client.get(f"/v1/users/{user_id}/memories/{memory['id']}/history")).json()
    assert [v["content"] for v in history["versions"]] == ["Ada keeps bees."]
    assert [v["is_current"] for v in history["versions"]] == [True]
    assert browser_like.cookies.get(COOKIE) == session
    assert (await browser_like.get("/console/outbox")).status_code == 200

    # With the token, the same form does its work.
    edited = await browser_like.post(
        f"{base}/memories/{memory['id']}/edit", data={"csrf": token, "content": "Ada keeps wasps."}
    )
    assert edited.status_code == 303, edited.text
    current = (await api_client.get(f"/v1/users/{user_id}/memories")).json()["items"]
    assert [m["content"] for m in current] == ["Ada keeps wasps."]
    assert edited.headers["location"] == f"{base}/memories/{current[0]['id']}"


async def test_get_never_logs_out(browser_like: httpx.AsyncClient) -> None:
    token = await logged_in(browser_like)
    asked = await browser_like.get("/console/logout")
    assert asked.status_code == 200 and 'action="/console/logout"' in asked.text
    assert "set-cookie" not in asked.headers
    assert (await browser_like.get("/console/outbox")).status_code == 200
    out = await browser_like.post("/console/logout", data={"csrf": token})
    assert out.status_code == 303 and out.headers["location"] == "/console/login"
    assert browser_like.cookies.get(COOKIE) is None
    assert (await browser_like.get("/console/outbox")).headers["location"] == "/console/login"


async def test_a_change_without_a_session_goes_to_login(
    browser_like: httpx.AsyncClient, api_client: httpx.AsyncClient, user_id: str
) -> None:
    await api_client.post(f"/v1/users/{user_id}/memories", json={"content": "Ada keeps bees."})
    answer = await browser_like.post(
        f"/console/users/{user_id}/erase",
        data={"confirm": user_id, "csrf": csrf.session_token(API_KEY)},
    )
    assert answer.headers["location"] == "/console/login"
    listed = (await api_client.get(f"/v1/users/{user_id}/memories")).json()["items"]
    assert [m["content"] for m in listed] == ["Ada keeps bees."]


async def test_a_change_from_a_page_someone_else_has_overtaken_is_refused(
    browser_like: httpx.AsyncClient, api_client: httpx.AsyncClient, user_id: str
) -> None:
    """The chain page's forms carry the version they show (If-Match): saved after another
    writer changed the memory, the edit is refused (412) instead of overwriting that change."""
    token = await logged_in(browser_like)
    memory = (
        await api_client.post(f"/v1/users/{user_id}/memories", json={"content": "Ada keeps bees."})
    ).json()
    base = f"/console/users/{user_id}/memories"
    shown = await browser_like.get(f"{base}/{memory['id']}")
    assert f'name="version" value="{memory["version_id"]}"' in shown.text
    assert 'class="version selected" id="v1"' in shown.text
    meanwhile = await api_client.patch(
        f"/v1/users/{user_id}/memories/{memory['id']}", json={"content": "Ada keeps wasps."}
    )
    assert meanwhile.status_code == 200, meanwhile.text
    stale = {"csrf": token, "version": memory["version_id"]}
    for action, form in (("edit", {**stale, "content": "Ada keeps ants."}), ("delete", stale)):
        refused = await browser_like.post(f"{base}/{memory['id']}/{action}", data=form)
        assert refused.status_code == 412, (action, refused.text)
    history = (await api_client.get(f"/v1/users/{user_id}/memories/{memory['id']}/history")).json()
    assert [v["content"] for v in history["versions"]] == ["Ada keeps bees.", "Ada keeps wasps."]
    # From the page as it is now: the new version is shown (selected), and the edit applies.
    shown = await browser_like.get(f"{base}/{memory['id']}")
    assert 'class="version selected" id="v2"' in shown.text
    current = {"csrf": token, "version": meanwhile.json()["version_id"]}
    edited = await browser_like.post(
        f"{base}/{memory['id']}/edit", data={**current, "content": "Ada keeps ants."}
    )
    assert edited.status_code == 303, edited.text
    # An earlier version's page selects that version.
    old = await browser_like.get(f"{base}/{memory['version_id']}")
    assert 'class="version selected" id="v1"' not in old.text  # v1's id is the memory's
    second = await browser_like.get(f"{base}/{meanwhile.json()['version_id']}")
    assert 'class="version selected" id="v2"' in second.text
