"""The API describes itself in `make serve`: GET /openapi.json is the committed document, and Swagger
UI at /docs (assets from the swagger-ui-dist npm package, nothing from a CDN) renders every operation
in headless Chromium."""

from __future__ import annotations

import json
from pathlib import Path

from playwright.sync_api import Browser, Request

from nimbus_tools.local.launcher import LocalApiProcess
from tests.e2e.conftest import SCREENSHOTS, Client

ROOT = Path(__file__).resolve().parents[2]
DOCUMENT = json.loads((ROOT / "docs" / "openapi.json").read_text(encoding="utf-8"))


def test_the_served_document_is_the_committed_one(client: Client) -> None:
    served = client.call("GET", "/openapi.json")

    assert served.status == 200
    assert {k.lower(): v for k, v in served.headers.items()}["content-type"].startswith("application/json")
    assert served.body == DOCUMENT


def test_swagger_ui_renders_every_operation_from_local_assets_only(
    local_api: LocalApiProcess, browser: Browser
) -> None:
    operations = sum(len(item) for item in DOCUMENT["paths"].values())
    page = browser.new_page(viewport={"width": 1280, "height": 900})
    fetched: list[str] = []

    def remember(request: Request) -> None:
        fetched.append(request.url)

    page.on("request", remember)
    page.goto(f"{local_api.api_url}/docs")
    page.wait_for_selector(".opblock", timeout=30_000)

    assert page.locator(".opblock").count() == operations
    assert page.locator(".info .title").inner_text().startswith("Nimbus")
    assert f"{local_api.api_url}/docs/assets/swagger-ui-bundle.js" in fetched
    assert [url for url in fetched if not url.startswith(local_api.api_url)] == []  # no CDN
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / "api-docs.png"))
    page.close()
