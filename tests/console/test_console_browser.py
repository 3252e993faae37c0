"""The web console in a real headless Chromium (Debian's chromium + chromium-driver, driven by
Selenium) against the real API: log in with a key, see memories written through the API, follow
a version chain, run an explained search, read ingestion decisions and the outbox; then act: edit
a memory into a new version, delete one, erase a user behind a typed confirmation, replay a
message in a dry run that writes nothing."""

from __future__ import annotations

import os
import shutil
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
from selenium import webdriver
from selenium.common.exceptions import StaleElementReferenceException, WebDriverException
from selenium.webdriver.chrome.options import Options
from selenium.webdriver.chrome.service import Service
from selenium.webdriver.common.by import By
from selenium.webdriver.remote.webdriver import WebDriver
from selenium.webdriver.remote.webelement import WebElement
from selenium.webdriver.support.ui import WebDriverWait
from sqlalchemy import text
from sqlalchemy.ext.asyncio import AsyncEngine

from tests.conftest import API_KEY, ROOT, ApiProcess, wait_until

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
CHROMEDRIVER = shutil.which("chromedriver")
pytestmark = pytest.mark.skipif(
    CHROMIUM is None or CHROMEDRIVER is None,
    reason="needs Debian's chromium and chromium-driver (`make install-test` installs them)",
)
# Set to a folder to refresh the docs' screenshots: COGNIS_CONSOLE_SCREENSHOTS=docs/console
SCREENSHOTS = os.environ.get("COGNIS_CONSOLE_SCREENSHOTS")


@pytest.fixture(scope="module")
def browser() -> Iterator[WebDriver]:
    options = Options()
    options.binary_location = str(CHROMIUM)
    for flag in ("--headless=new", "--no-sandbox", "--disable-dev-shm-usage", "--disable-gpu"):
        options.add_argument(flag)
    options.add_argument("--window-size=1280,800")
    driver = webdriver.Chrome(service=Service(executable_path=str(CHROMEDRIVER)), options=options)
    driver.implicitly_wait(5)
    yield driver
    driver.quit()


def page_replaced(old_page: WebElement) -> Callable[[WebDriver], bool]:
    """Selenium's `staleness_of`, also when Chromium is caught mid-swap: asked about the old
    page's element while the new document replaces it, it may answer "Node with given id does
    not belong to the document" (an unknown error, not a stale element, seen in CI); the next
    poll then sees the element stale."""

    def replaced(_: WebDriver) -> bool:
        try:
            old_page.is_enabled()
        except StaleElementReferenceException:
            return True
        except WebDriverException as error:
            if "does not belong to the document" in (error.msg or ""):
                return False
            raise
        return False

    return replaced


def log_in(browser: WebDriver, api: ApiProcess, key: str) -> None:
    browser.get(f"{api.url}/console/login")
    browser.find_element(By.ID, "key").send_keys(key)
    old_page = browser.find_element(By.TAG_NAME, "html")
    browser.find_element(By.ID, "login").click()
    WebDriverWait(browser, 30).until(page_replaced(old_page))


def follow(browser: WebDriver, element: WebElement, url_part: str) -> None:
    """Click (or change) and wait until the new page is loaded at a URL containing url_part."""
    old_page = browser.find_element(By.TAG_NAME, "html")
    element.click()
    WebDriverWait(browser, 30).until(page_replaced(old_page))
    WebDriverWait(browser, 30).until(lambda b: url_part in b.current_url)


def texts(browser: WebDriver, css: str) -> list[str]:
    return [element.text for element in browser.find_elements(By.CSS_SELECTOR, css)]


def submit(browser: WebDriver, element_id: str, url_part: str = "") -> None:
    """Click a form's button and wait for the page it leads to."""
    follow(browser, browser.find_element(By.ID, element_id), url_part)


def screenshot(browser: WebDriver, name: str) -> None:
    if SCREENSHOTS:
        browser.save_screenshot(str(Path(ROOT, SCREENSHOTS, name)))


async def test_console_end_to_end(
    browser: WebDriver, api: ApiProcess, api_client: httpx.AsyncClient, user_id: str
) -> None:
    browser.delete_all_cookies()
    browser.get(f"{api.url}/console/users/{user_id}")
    assert browser.current_url.endswith("/console/login")  # not logged in: sent to log in
    # Before login, no navigation: neither Users, Outbox nor Log out.
    assert browser.find_elements(By.ID, "nav") == []
    assert browser.find_elements(By.ID, "logout") == []
    assert "Outbox" not in browser.find_element(By.TAG_NAME, "header").text
    log_in(browser, api, "not-" + API_KEY)
    assert "not accepted" in browser.find_element(By.ID, "login-error").text
    log_in(browser, api, API_KEY)
    assert browser.current_url.endswith("/console")
    assert texts(browser, "#nav > a") == ["Users", "Outbox"]
    assert browser.find_element(By.ID, "logout").text == "Log out"

    tokyo = (
        await api_client.post(
            f"/v1/users/{user_id}/memories",
            json={"content": "Mika lives in Tokyo near the river.", "category": "personal_details"},
        )
    ).json()
    moved = await api_client.patch(
        f"/v1/users/{user_id}/memories/{tokyo['id']}",
        json={"content": "Mika lives in Osaka near the river."},
    )
    assert moved.status_code == 200, moved.text
    await api_client.post(
        f"/v1/users/{user_id}/memories",
        json={"content": "Mika is learning the shamisen.", "category": "hobbies"},
    )

    # Users: this user is listed with 2 current memories and 3 versions.
    browser.get(f"{api.url}/console?prefix={user_id}")
    (row,) = texts(browser, "#users tr:not(:first-child)")
    assert row.split()[:3] == [user_id, "2", "3"]
    # The console's script and stylesheet load under its Content-Security-Policy (no inline
    # code): "Open a user" is the script's, and the header keeps its styled colour.
    browser.find_element(By.ID, "open-user").send_keys(user_id)
    follow(browser, browser.find_element(By.CSS_SELECTOR, "#open-user-form button"), user_id)
    assert browser.current_url.endswith(f"/console/users/{user_id}")
    header = browser.find_element(By.TAG_NAME, "header")
    assert header.value_of_css_property("background-color") == "rgba(29, 42, 68, 1)"
    refused = [e for e in browser.get_log("browser") if "Content Security Policy" in e["message"]]
    assert refused == [], refused

    # Memories, with a category filter applied by the light JS (a select's change submits).
    follow(browser, browser.find_element(By.LINK_TEXT, user_id), f"/console/users/{user_id}")
    assert set(texts(browser, "a.memory")) == {
        "Mika lives in Osaka near the river.",
        "Mika is learning the shamisen.",
    }
    hobbies = browser.find_element(By.CSS_SELECTOR, "select[name=category] option[value=hobbies]")
    follow(browser, hobbies, "category=hobbies")
    assert texts(browser, "a.memory") == ["Mika is learning the shamisen."]

    # The chain: two versions, the second showing what changed.
    browser.get(f"{api.url}/console/users/{user_id}")
    osaka = browser.find_element(By.LINK_TEXT, "Mika lives in Osaka near the river.")
    follow(browser, osaka, "/memories/")
    versions = browser.find_elements(By.CSS_SELECTOR, "#timeline li.version")
    assert [v.get_attribute("id") for v in versions] == ["v1", "v2"]
    assert texts(browser, "#v2 del") == ["Tokyo"] and texts(browser, "#v2 ins") == ["Osaka"]
    assert "Tokyo" not in texts(browser, "#v1 del")

    # The filter bar: an agent's memory found by the filter language, with its expiry shown.
    coached = await api_client.post(
        f"/v1/users/{user_id}/memories",
        json={
            "content": "Mika's coach says to stretch every morning.",
            "category": "health",
            "agent_id": "coach",
            "ttl_s": 86_400,
        },
    )
    assert coached.status_code == 201, coached.text
    browser.get(f"{api.url}/console/users/{user_id}")
    assert set(texts(browser, "td.expires")) == {
        "",
        coached.json()["expires_at"][:16].replace("T", " "),
    }
    browser.find_element(By.ID, "where").send_keys(
        '{"field": "agent", "op": "eq", "value": "coach"}'
    )
    follow(browser, browser.find_element(By.CSS_SELECTOR, "form.filters button"), "where=")
    assert texts(browser, "a.memory") == ["Mika's coach says to stretch every morning."]
    assert texts(browser, "td.agent") == ["coach"]
    browser.get(f"{api.url}/console/users/{user_id}?where=not+json")
    assert "not JSON" in browser.find_element(By.ID, "problem-detail").text

    # Explained search: the final rank beside every stage's rank and score.
    browser.get(f"{api.url}/console/users/{user_id}/search")
    browser.find_element(By.ID, "query").send_keys("Which city does Mika live in?")
    follow(browser, browser.find_element(By.ID, "search"), "q=")
    first = browser.find_element(By.CSS_SELECTOR, "#results tr:nth-child(2)")
    assert "Mika lives in Osaka near the river." in first.text
    # The memory text is wide; the stage columns are collapsed until asked for.
    final = first.find_element(By.CSS_SELECTOR, "td.stage-final")
    memory_cell = first.find_element(By.CSS_SELECTOR, "td.memory-text")
    table = browser.find_element(By.ID, "results")
    assert not final.is_displayed()
    assert memory_cell.size["width"] > table.size["width"] / 3
    relevance = float(first.find_element(By.CSS_SELECTOR, "td.relevance").text)
    assert 0 < relevance <= 1
    screenshot(browser, "search.png")
    browser.find_element(By.ID, "show-stages").click()
    assert final.is_displayed() and final.text.startswith("#1 · ")
    assert first.find_element(By.CSS_SELECTOR, "td.stage-768d").text.startswith("#")
    screenshot(browser, "search-stages.png")
    # A floor above the best result: nothing relevant.
    browser.find_element(By.ID, "min-relevance").send_keys(f"{min(1.0, relevance + 0.01):.2f}")
    follow(browser, browser.find_element(By.ID, "search"), "min_relevance=")
    assert texts(browser, "#results td.muted") == ["No results."]

    # Ingestion: a message's job with its decision and extractor.
    job = await api_client.post(
        f"/v1/users/{user_id}/messages",
        params={"wait": "true"},
        json={"messages": [{"content": "I just adopted a beagle named Toffee."}]},
    )
    assert job.json()["state"] == "done", job.text
    browser.get(f"{api.url}/console/users/{user_id}/jobs")
    decisions = texts(browser, "table.decisions tr:not(:first-child)")
    assert len(decisions) == 1 and decisions[0].startswith("ADD")
    assert "I just adopted a beagle named Toffee." in decisions[0]
    assert "deterministic" in decisions[0]

    # Outbox: the backlog figure is the database's.
    browser.get(f"{api.url}/console/outbox")
    assert browser.find_element(By.ID, "pending").text.isdigit()

    # An API error shows as the problem's detail, not a stack trace.
    browser.get(f"{api.url}/console/users/{user_id}/memories/not-a-uuid")
    assert "not-a-uuid" in browser.find_element(By.ID, "problem-detail").text

    # A GET of /console/logout (a link, an image on another page) does not log out: it asks.
    browser.get(f"{api.url}/console/logout")
    browser.get(f"{api.url}/console/outbox")
    assert browser.current_url.endswith("/console/outbox")
    # The header's button does (a POST with the session's token).
    follow(browser, browser.find_element(By.ID, "logout"), "/console/login")
    assert browser.find_elements(By.ID, "nav") == []
    browser.get(f"{api.url}/console/outbox")
    assert browser.current_url.endswith("/console/login")


async def test_console_acts(
    browser: WebDriver,
    api: ApiProcess,
    api_client: httpx.AsyncClient,
    db: AsyncEngine,
    user_id: str,
    other_user_id: str,
) -> None:
    browser.delete_all_cookies()
    log_in(browser, api, API_KEY)
    written = [
        (
            await api_client.post(
                f"/v1/users/{user_id}/memories", json={"content": c, "category": k}
            )
        ).json()
        for c, k in [
            ("Noor drinks her coffee black.", "preferences"),
            ("Noor plays padel on Sundays.", "hobbies"),
        ]
    ]
    coffee, padel = (m["id"] for m in written)

    # Edit: a PATCH writing v2, which the chain then shows (selected) with its diff.
    browser.get(f"{api.url}/console/users/{user_id}/memories/{coffee}")
    content = browser.find_element(By.ID, "edit-content")
    content.clear()
    content.send_keys("Noor drinks her coffee with oat milk.")
    submit(browser, "save", "/memories/")
    assert [
        v.get_attribute("id") for v in browser.find_elements(By.CSS_SELECTOR, "li.version")
    ] == [
        "v1",
        "v2",
    ]
    assert "selected" in (browser.find_element(By.ID, "v2").get_attribute("class") or "")
    assert texts(browser, "#v2 ins") == ["with oat milk."]
    screenshot(browser, "chain-edit.png")
    history = (await api_client.get(f"/v1/users/{user_id}/memories/{coffee}/history")).json()
    assert [v["content"] for v in history["versions"]] == [
        "Noor drinks her coffee black.",
        "Noor drinks her coffee with oat milk.",
    ]

    # Delete: from the list, the memory leaves it (its history stays).
    browser.get(f"{api.url}/console/users/{user_id}")
    row = browser.find_element(
        By.XPATH, "//tr[td/a[text()='Noor plays padel on Sundays.']]//button[@class='small delete']"
    )
    follow(browser, row, "deleted=")
    assert browser.find_element(By.ID, "deleted").is_displayed()
    assert texts(browser, "a.memory") == ["Noor drinks her coffee with oat milk."]
    gone = await api_client.get(f"/v1/users/{user_id}/memories/{padel}/history")
    assert [v["is_current"] for v in gone.json()["versions"]] == [False]

    # Dry run: the decisions a message would lead to, and nothing written.
    async def counts() -> tuple[int, int]:
        listed = await api_client.get(
            f"/v1/users/{user_id}/memories", params={"include_superseded": "true"}
        )
        async with db.connect() as connection:
            messages = await connection.scalar(
                text("SELECT count(*) FROM messages WHERE user_id = :u"), {"u": user_id}
            )
        return len(listed.json()["items"]), int(messages or 0)

    before = await counts()
    browser.get(f"{api.url}/console/users/{user_id}/dry-run")
    browser.find_element(By.ID, "content").send_keys("I started learning Portuguese.")
    submit(browser, "dry-run", "/dry-run")
    decisions = texts(browser, "#dry-run-result table.decisions tr:not(:first-child)")
    assert len(decisions) == 1 and decisions[0].startswith("ADD"), decisions
    assert "I started learning Portuguese." in decisions[0]
    screenshot(browser, "dry-run.png")
    assert await counts() == before

    # Replay a stored message from the jobs page in a dry run: its content and time come along.
    submitted = await api_client.post(
        f"/v1/users/{user_id}/messages",
        json={
            "messages": [
                {"content": "I moved to Lisbon.", "timestamp": "2026-03-01T09:30:00+01:00"}
            ]
        },
    )
    assert submitted.status_code == 202, submitted.text

    async def job_done() -> bool:
        job = await api_client.get(f"/v1/users/{user_id}/jobs/{submitted.json()['job_id']}")
        return job.json().get("state") == "done"

    await wait_until(job_done, timeout=300)
    after_job = await counts()
    browser.get(f"{api.url}/console/users/{user_id}/jobs")
    follow(browser, browser.find_element(By.CSS_SELECTOR, "a.replay"), "/dry-run?message=")
    assert browser.find_element(By.ID, "content").get_attribute("value") == "I moved to Lisbon."
    assert browser.find_element(By.ID, "timestamp").get_attribute("value") == (
        "2026-03-01T09:30:00+01:00"
    )
    submit(browser, "dry-run", "/dry-run")
    # Already applied: the replay would now change nothing (the memory it made is there).
    assert "I moved to Lisbon." in browser.find_element(By.CSS_SELECTOR, "#dry-run-result q").text
    replayed = texts(browser, "#dry-run-result table.decisions tr:not(:first-child)")
    assert len(replayed) == 1 and replayed[0].startswith("NONE"), replayed
    assert await counts() == after_job

    # Erase: a wrong confirmation erases nothing and says why; the user id typed erases.
    await api_client.post(
        f"/v1/users/{other_user_id}/memories", json={"content": "Bystander fact."}
    )
    browser.get(f"{api.url}/console/users/{user_id}/erase")
    browser.find_element(By.ID, "confirm").send_keys(user_id + "x")
    submit(browser, "erase", "/erase")
    assert "nothing was erased" in browser.find_element(By.ID, "erase-error").text
    screenshot(browser, "erase-refused.png")
    assert await counts() == after_job
    browser.find_element(By.ID, "confirm").send_keys(user_id)
    submit(browser, "erase", "/erase")
    assert user_id in browser.find_element(By.ID, "erased").text
    assert await counts() == (0, 0)
    browser.get(f"{api.url}/console?prefix={user_id}")
    assert texts(browser, "#users a") == []
    other = await api_client.get(f"/v1/users/{other_user_id}/memories")
    assert [m["content"] for m in other.json()["items"]] == ["Bystander fact."]
