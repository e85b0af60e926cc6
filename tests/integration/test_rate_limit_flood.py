"""A flood from one address: its refusals stop costing DynamoDB writes, other addresses are counted as
ever, and a throttled counter item answers a clean 429."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from nimbus_core.adapters import clients, container
from nimbus_core.adapters.items import from_item
from nimbus_tools.local.inprocess import Reply
from tests.integration.conftest import Api, Clock, Faults, Stack

PASSWORD = "correct horse"
FLOODER = "192.0.2.66"
NEIGHBOUR = "198.51.100.23"
LOGIN_LIMIT = 4
LOGIN_WINDOW = 5 * 60
RATELIMITED = {"code": "RATELIMITED_ERROR", "message": "You Have Been Ratelimited. Please Try Again Later."}


class CounterWrites:
    """The UpdateItems the functions send to each IP's counter item, seen at the SDK boundary."""

    def __init__(self) -> None:
        self.keys: list[str] = []
        self._hooked: list[Any] = []

    def hook(self) -> None:
        """Watch the DynamoDB client the functions use now (a new instance makes a new one)."""
        client = clients.dynamodb()
        client.meta.events.register("before-parameter-build.dynamodb.UpdateItem", self._seen)
        self._hooked.append(client)

    def _seen(self, params: dict[str, Any], **_: Any) -> None:
        key = params.get("Key", {}).get("pk", {}).get("S", "")
        self.keys.append(key)

    def of(self, ip: str) -> int:
        return sum(1 for key in self.keys if key.endswith(f"#{ip}"))

    def unhook(self) -> None:
        while self._hooked:
            self._hooked.pop().meta.events.unregister(
                "before-parameter-build.dynamodb.UpdateItem", self._seen
            )


@pytest.fixture
def writes(stack: Stack) -> Iterator[CounterWrites]:
    watched = CounterWrites()
    watched.hook()
    yield watched
    watched.unhook()


def login(api: Api, ip: str, password: str = "not the password") -> Reply:
    return api.login("alice", password, ip=ip)


def counters_of(stack: Stack, ip: str) -> list[dict[str, Any]]:
    items = [from_item(item) for item in stack.items("CountersTable")]
    return [item for item in items if item["pk"].endswith(f"#{ip}")]


def test_a_flood_costs_one_counter_update_per_instance_per_window_after_the_first_refusal(
    api: Api, stack: Stack, token: str, frozen: Clock, writes: CounterWrites
) -> None:
    counted = [login(api, FLOODER) for _ in range(LOGIN_LIMIT)]
    first_refusal = login(api, FLOODER, PASSWORD)
    flood = [login(api, FLOODER, PASSWORD) for _ in range(20)]

    assert [r.status for r in counted] == [401] * LOGIN_LIMIT
    assert first_refusal.status == 429
    assert {r.status for r in flood} == {429}
    assert writes.of(FLOODER) == LOGIN_LIMIT + 1  # the flood itself wrote nothing
    # A repeated refusal is the refusal DynamoDB made: same body and headers.
    assert all(r.body == first_refusal.body == RATELIMITED for r in flood)
    assert all(r.headers == first_refusal.headers for r in flood)
    assert counters_of(stack, FLOODER)[0]["count"] == LOGIN_LIMIT

    # Another instance learns the refusal once, the same way.
    container.reset()
    writes.hook()
    assert {login(api, FLOODER, PASSWORD).status for _ in range(10)} == {429}
    assert writes.of(FLOODER) == LOGIN_LIMIT + 2

    # The next window is counted again (the expired window's item takes its two UpdateItems).
    frozen.now += LOGIN_WINDOW
    assert login(api, FLOODER, PASSWORD).status == 201
    assert writes.of(FLOODER) == LOGIN_LIMIT + 4


def test_another_address_is_counted_normally_during_a_flood(
    api: Api, stack: Stack, token: str, frozen: Clock, writes: CounterWrites
) -> None:
    for _ in range(LOGIN_LIMIT + 10):
        login(api, FLOODER)

    neighbour = [login(api, NEIGHBOUR, PASSWORD) for _ in range(LOGIN_LIMIT + 1)]

    assert [r.status for r in neighbour] == [201] * LOGIN_LIMIT + [429]
    assert [r.headers["RateLimit-Remaining"] for r in neighbour[:LOGIN_LIMIT]] == ["3", "2", "1", "0"]
    assert writes.of(NEIGHBOUR) == LOGIN_LIMIT + 1
    assert counters_of(stack, NEIGHBOUR)[0]["count"] == LOGIN_LIMIT


@pytest.mark.parametrize("code", ["ProvisionedThroughputExceededException", "ThrottlingException"])
def test_a_throttled_counter_item_answers_a_clean_429_and_spares_other_addresses(
    api: Api, stack: Stack, token: str, faults: Faults, code: str
) -> None:
    faults.fail("dynamodb", "UpdateItem", code, 400, times=1)

    refused = login(api, FLOODER, PASSWORD)

    assert refused.status == 429, refused.body
    assert refused.body == RATELIMITED
    assert refused.headers["Retry-After"] == "1"
    assert refused.headers["RateLimit-Limit"] == str(LOGIN_LIMIT)
    assert refused.headers["RateLimit-Remaining"] == "0"
    assert refused.headers["RateLimit-Reset"] == "1"
    assert counters_of(stack, FLOODER) == []
    # Not memoised: no window is known, so the next request asks DynamoDB again and is counted.
    assert login(api, FLOODER, PASSWORD).status == 201
    assert login(api, NEIGHBOUR, PASSWORD).status == 201
