"""The consoles' Activity (CONTRACT section 17) in headless Chromium against the real local API: the
account's own page and a user's activity on the staff console's user page, both read through
GET .../activity; the new sign-in notice's link (/console/sessions) opened by a signed-out tab; and
a password from the breached lists said at its field.

The events are recorded asynchronously (the local API's stream poller runs the ActivityFunction on
the outbox stream, as Lambda's event source mapping does deployed), so each test first waits until
the API lists what it did, then checks that the page shows exactly that. The account's page, with a
failure on it, is audited with axe (tests/e2e/test_console_accessibility.py) as it is shown.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest
from playwright.sync_api import Locator, expect

from nimbus_tools.local.launcher import LocalApiProcess
from tests.api_client import new_ip, new_name
from tests.e2e.browser_tab import Console
from tests.e2e.conftest import Client
from tests.e2e.test_console import registered
from tests.e2e.test_console_accessibility import audited, violations
from tests.e2e.test_staff_console import _log_in as staff_log_in
from tests.e2e.test_staff_console import _open as staff_open
from tests.e2e.test_staff_console import _staff

pytestmark = pytest.mark.e2e

__all__ = ["audited"]  # the fixture, imported to be used here

Events = list[dict[str, Any]]


def _listed(client: Client, path: str, token: str, ready: Callable[[Events], bool], **page: int) -> Events:
    """The events ``path`` answers (one page: ``limit``, ``offset``) once ``ready`` holds for them:
    each is stored a moment after what it records."""
    query = "&".join(f"{k}={v}" for k, v in page.items())
    deadline = time.monotonic() + 20
    while True:
        reply = client.call("GET", f"{path}?{query}" if query else path, token=token)
        assert reply.status == 200, reply.body
        items: Events = reply.body["items"]
        if ready(items):
            return items
        assert time.monotonic() < deadline, f"the activity never got there: {items}"
        time.sleep(0.2)


def _rows(table: Locator) -> list[str | None]:
    """The event ids of the table's rows, top to bottom."""
    return [row.get_attribute("data-event-id") for row in table.locator("tbody tr").all()]


def test_the_activity_page_lists_the_events_newest_first_marks_a_failure_and_refreshes(
    audited: Console, client: Client
) -> None:
    console = audited  # axe is injected: this tab bypasses the CSP
    name, token = registered(client)
    wrong_from = new_ip()
    assert client.login(name, "not the password", ip=wrong_from).status == 401
    page = console.page
    console.log_in(name)
    console.expect_view("account")
    # Registered, the failed sign-in and the console's own.
    events = _listed(client, "/users/me/activity", token, lambda items: len(items) >= 3)

    page.get_by_role("navigation", name="Account").get_by_role("link", name="Activity").click()
    console.expect_view("activity")
    table = page.get_by_role("table", name="Your account's activity, newest first")
    expect(table.locator("tbody tr")).to_have_count(len(events))
    assert _rows(table) == [event["id"] for event in events]
    shown = len(events)
    expect(page.locator("#activity-count")).to_have_text(f"Showing events 1 to {shown} of {shown}.")
    expect(page.get_by_role("navigation", name="Pages of activity")).to_be_hidden()  # one page only

    by_type = {(e["type"], e["outcome"]): e for e in events}
    failed = by_type[("sign-in", "failure")]
    assert (failed["code"], failed["ip"]) == ("INVALID_PASSWORD_ERROR", wrong_from)
    assert failed["method"] == "password"
    failed_row = table.locator(f"tr[data-event-id='{failed['id']}']")
    expect(failed_row).to_have_class("failed")
    expect(failed_row.get_by_role("cell").nth(0)).to_have_text("Sign-in with the password")
    expect(failed_row.get_by_role("cell").nth(1)).to_have_text("Failed INVALID_PASSWORD_ERROR")
    expect(failed_row.get_by_role("cell").nth(2)).to_contain_text(wrong_from)
    signed_in = by_type[("sign-in", "success")]
    signed_in_row = table.locator(f"tr[data-event-id='{signed_in['id']}']")
    expect(signed_in_row.get_by_role("cell").nth(1)).to_have_text("Succeeded")
    expect(signed_in_row.get_by_role("cell").nth(2)).to_contain_text(console.ip)  # the tab's own address
    registered_row = table.locator("tr[data-type=registered]")
    expect(registered_row.get_by_role("cell").nth(0)).to_have_text("Account created")
    # When, in the browser's time zone (UTC here) and locale, with the instant in <time datetime>.
    expect(signed_in_row.locator("time")).to_have_attribute("datetime", signed_in["at"])

    # A new event is listed once the page is refreshed, on top.
    assert client.login(name, "still not the password", ip=new_ip()).status == 401
    newer = _listed(client, "/users/me/activity", token, lambda items: len(items) > len(events))
    page.get_by_role("button", name="Refresh").click()
    expect(page.locator("#status")).to_have_text("Activity refreshed.")
    expect(table.locator("tbody tr")).to_have_count(len(newer))
    assert _rows(table) == [event["id"] for event in newer]
    assert newer[0]["outcome"] == "failure"
    assert page.evaluate("document.activeElement.textContent") == "Refresh"
    console.screenshot("console-activity.png", full_page=True)
    assert violations(console) == []


def test_the_staff_user_page_pages_through_the_users_activity(
    console: Console, client: Client, local_api: LocalApiProcess
) -> None:
    staff, staff_token, _, codes = _staff(client, local_api)
    target, target_token = registered(client)
    target_id = client.call("GET", "/users/me", token=target_token).body["id"]
    for _ in range(11):  # with the registration, more than one page of ten
        assert client.login(target).status == 201
    path = f"/users/{target_id}/activity"
    everything = _listed(client, path, staff_token, lambda items: len(items) >= 12, limit=50)
    staff_log_in(console, staff, codes[0])
    console.expect_view("users")

    staff_open(console, f"users/{target_id}")
    console.expect_view("user")
    page = console.page
    section = page.get_by_role("region", name="Activity")
    table = section.get_by_role("table", name="The user's activity, newest first")
    expect(table.locator("tbody tr")).to_have_count(10)
    total = len(everything)
    expect(section.locator("#activity-count")).to_have_text(f"Showing events 1 to 10 of {total}.")
    expect(section.locator("#activity-page")).to_have_text(f"Page 1 of {-(-total // 10)}")
    assert _rows(table) == [event["id"] for event in everything[:10]]
    expect(section.get_by_role("button", name="Previous page")).to_be_disabled()

    section.get_by_role("button", name="Next page").click()
    second = f"Showing events 11 to {min(20, total)} of {total}."
    expect(section.locator("#activity-count")).to_have_text(second)
    assert _rows(table) == [event["id"] for event in everything[10:20]]
    expect(section.get_by_role("button", name="Next page")).to_be_disabled()
    # The focus stays on the pager: Next is disabled now, so it moves to Previous.
    assert page.evaluate("document.activeElement.textContent") == "Previous page"
    section.get_by_role("button", name="Previous page").click()
    expect(section.locator("#activity-count")).to_have_text(f"Showing events 1 to 10 of {total}.")
    assert _rows(table) == [event["id"] for event in everything[:10]]
    section.evaluate("(section) => section.scrollIntoView()")  # below the user's details
    console.screenshot("staff-console-activity.png")


def test_the_sessions_link_opened_signed_out_logs_in_and_lands_on_the_sessions(
    console: Console, client: Client
) -> None:
    name, _ = registered(client)
    page = console.page
    console.open("sessions")  # the new sign-in notice's link

    console.expect_view("login")
    assert page.url == f"{console.url}/login?next=sessions"
    console.log_in(name, open_page=False)
    console.expect_view("sessions")
    assert page.url == f"{console.url}/sessions"
    expect(page.locator("#sessions-table tbody tr")).to_have_count(2)  # the registration's and this one
    expect(page.locator("#status")).to_have_text("Logged in.")


def test_a_breached_password_is_refused_and_said_at_its_field(console: Console, client: Client) -> None:
    page = console.page
    console.open("register")
    name = new_name("b")
    page.get_by_label("Username").fill(name)
    page.get_by_label("Email").fill(f"{name}@example.com")
    page.locator("#register-password").fill("password123")
    page.get_by_label("Repeat the password").fill("password123")
    page.get_by_role("button", name="Create account").click()

    message = "This password appears in lists of breached passwords; choose another."
    expect(page.get_by_role("alert").first).to_have_text(f"{message} (INSECURE_PASSWORD_ERROR)")
    field = page.locator("#register-password")
    expect(field).to_have_attribute("aria-invalid", "true")
    expect(field).to_be_focused()
    # Said with the field: its description starts with the message (then the length hint).
    expect(field).to_have_accessible_description(f"{message} 8 to 64 characters.")
    console.screenshot("console-breached-password.png")
    assert client.login(name, "password123").body["code"] == "INVALID_USER_ERROR"  # no account was made
    field.fill("a less common passphrase")
    expect(field).not_to_have_attribute("aria-invalid", "true")
    expect(page.locator("#register-password-error")).to_have_count(0)
