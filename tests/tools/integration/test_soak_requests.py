"""The soak's requests (bench/soak/client.py) over a real socket: what fails the soak and what does
not. A small HTTP server answers each request with the status its path names."""

from __future__ import annotations

import json
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from threading import Thread

import pytest

from bench.soak.client import Soak
from bench.soak.memory import Sample, memory_figures
from bench.soak.report import verdict
from nimbus_tools.local.state import ServeState
from tests.api_client import UnexpectedReplyError

pytestmark = pytest.mark.waits  # requests against a server of its own

FLAT = memory_figures([Sample(float(i), {1: 100}, 0, 0) for i in range(4)], warm_up=0, main=1)
USER_ID = "01JZ8Q6V6N3W0F7R5T2Y9K4M1C"  # as new_id makes them


class _Status(BaseHTTPRequestHandler):
    """Answers ``/status/<code>/...`` with that status and a JSON body."""

    def _answer(self) -> None:
        status = int(self.path.split("/")[2])
        body = json.dumps({"code": f"STATUS_{status}"}).encode()
        self.send_response(status)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = _answer  # noqa: N815 (the names http.server calls)

    def log_message(self, format: str, *args: object) -> None:
        """Quiet."""


@pytest.fixture
def soak() -> Iterator[Soak]:
    """A soak whose API is the status server (its emulator is never reached here)."""
    server = ThreadingHTTPServer(("127.0.0.1", 0), _Status)
    Thread(target=server.serve_forever, daemon=True).start()
    state = ServeState(
        api_url=f"http://127.0.0.1:{server.server_address[1]}",
        aws_endpoint_url="http://127.0.0.1:9",
        region="us-east-1",
        stage="local",
        tables={},
        parameters={},
        pid=0,
    )
    yield Soak(state, Path("serve.json"), seed=1, think=0.0)
    server.shutdown()
    server.server_close()


def test_a_5xx_and_a_hostile_request_answered_2xx_fail_the_soak(soak: Soak) -> None:
    soak.call("GET", "/status/503", ip="127.0.0.1")
    soak.call("POST", "/status/201", {"username": "x"}, ip="127.0.0.1", note="[forged token]", hostile=True)

    assert (soak.counts["server_errors"], soak.counts["accepted_hostile"]) == (1, 1)
    assert "5xx: GET /status/503" in soak.failures[0]
    assert "hostile request accepted: POST /status/201 [forged token]" in soak.failures[1]
    assert verdict({**soak.counts, "invariant_checks": 1}, FLAT) == [
        "1 answers with a 5xx status",
        "1 hostile requests answered with a 2xx",
    ]


def test_a_refused_hostile_request_and_an_expected_4xx_fail_nothing(soak: Soak) -> None:
    soak.call("GET", "/status/401", ip="127.0.0.1", note="[revoked token]", hostile=True)
    soak.call("GET", "/status/404", ip="127.0.0.1")

    assert soak.failures == []
    assert verdict({**soak.counts, "invariant_checks": 1}, FLAT) == []


def test_a_status_the_user_cannot_go_on_without_ends_its_life_but_fails_nothing(soak: Soak) -> None:
    with pytest.raises(UnexpectedReplyError, match="GET /status/409: 409 STATUS_409"):
        soak.call("GET", "/status/409", ip="127.0.0.1", want=200)

    assert soak.call("GET", "/status/200", ip="127.0.0.1", want=200).status == 200
    assert soak.failures == []


def test_a_request_without_an_answer_fails_the_soak_and_ends_the_life(soak: Soak) -> None:
    soak.port = 9  # nothing listens there

    with pytest.raises(UnexpectedReplyError, match="no answer"):
        soak.call("GET", "/status/200", ip="127.0.0.1")

    assert soak.counts["transport_errors"] == 1
    assert soak.requests == 0


def test_each_request_is_recorded_by_route_with_ids_read_as_id(soak: Soak) -> None:
    soak.call("GET", f"/status/200/{USER_ID}?limit=5", ip="127.0.0.1")
    soak.call("GET", f"/status/200/{USER_ID.lower()}", ip="127.0.0.1")
    soak.call("GET", "/status/200/me", ip="127.0.0.1", note="2fa")

    assert {kind: [s for s, _ in answers] for kind, answers in soak.kinds.items()} == {
        "GET /status/200/:id": [200, 200],
        "GET /status/200/me 2fa": [200],
    }
    assert soak.requests == 3
