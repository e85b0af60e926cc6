"""The session sweeper on moto, fed the users table's stream (keys only) as its event source mapping
would feed it: stale generations and deleted users' sessions are removed, current sessions and claim
changes are left alone, and a fault mid-sweep is reported, retried and finished."""

from __future__ import annotations

import json
from typing import Any

import boto3
import pytest

from nimbus_core.adapters import clients
from nimbus_core.adapters.sessions import DynamoSessions, session_item
from nimbus_core.adapters.transactions import DynamoTransactor
from nimbus_core.adapters.users import DynamoUsers
from nimbus_core.domain.models import Session, User
from nimbus_core.sessions.session_issuer import revoke_all
from tests.contract.builders import a_session
from tests.integration.conftest import Api, Faults, Stack, take_messages
from tests.integration.stream_feed import Invocation

PASSWORD = "correct horse"


class Store:
    """The production adapters on the stack's tables, for arranging and inspecting state."""

    def __init__(self, stack: Stack) -> None:
        client = self.client = clients.dynamodb()
        self.stack = stack
        self.users = DynamoUsers(client, stack.table("UsersTable"))
        self.sessions = DynamoSessions(
            client, stack.table("SessionsTable"), stack.table("UsersTable"), stack.table("TokensTable")
        )
        self.tx = DynamoTransactor(client)

    def user(self, token: str) -> User:
        return self.user_by_id(token.partition(".")[0])

    def add_sessions(self, user: User, count: int) -> list[Session]:
        """``count`` sessions of ``user``'s current generation, stored by batch puts (moto copies a
        table for every transaction, so 100-item transactions would be slow to arrange)."""
        sessions = [a_session(user, exp=2_000_000_000) for _ in range(count)]
        table = self.stack.table("SessionsTable")
        for start in range(0, count, 25):
            chunk = sessions[start : start + 25]
            puts: list[Any] = [{"PutRequest": {"Item": session_item(s)}} for s in chunk]
            assert not self.client.batch_write_item(RequestItems={table: puts}).get("UnprocessedItems")
        return sessions

    def revoke_all(self, user: User) -> User:
        """Bump the user's generation as revoke-all, bans and staff password sets do."""
        revoked = revoke_all(user)
        self.tx.commit(self.users.change_ops(user, revoked))
        return revoked

    def user_by_id(self, user_id: str) -> User:
        found = self.users.get(user_id)
        assert found is not None
        return found

    def stored(self, user_id: str) -> set[str]:
        return set(self.sessions.list_ids(user_id))


@pytest.fixture
def store(stack: Stack) -> Store:
    return Store(stack)


@pytest.fixture
def fast_backoff(monkeypatch: pytest.MonkeyPatch) -> None:
    """No waiting in the batch helpers' retries of unprocessed items."""
    monkeypatch.setattr("time.sleep", lambda _s: None)


def register(api: Api, name: str) -> str:
    reply = api.register(name, ip=f"198.51.100.{len(name)}")
    assert reply.status == 201, reply.body
    return str(reply.body["token"])


def keys_of(invocations: list[Invocation]) -> list[tuple[str, str]]:
    return [(r["eventName"], r["dynamodb"]["Keys"]["pk"]["S"]) for i in invocations for r in i.records]


def test_a_revoked_users_600_stale_sessions_are_swept_and_the_new_generation_stays(
    api: Api, stack: Stack, store: Store
) -> None:
    token = register(api, "alice")
    user = store.user(token)
    store.add_sessions(user, 600)  # with the registration's session: 601 of generation 0
    user = store.revoke_all(user)
    current = store.add_sessions(user, 3)

    invocations = stack.sweep()

    assert [i.failures for i in invocations] == [[]]
    assert keys_of(invocations) == [("MODIFY", f"USER#{user.id}")]  # the INSERTs were filtered out
    assert store.stored(user.id) == {s.id for s in current}
    assert api.call("GET", "/users/me", token=token).status == 401
    assert stack.sweep() == []  # nothing new: no invocation


def test_a_password_change_over_the_api_leaves_only_the_calling_session_after_the_sweep(
    api: Api, stack: Stack, store: Store
) -> None:
    token = register(api, "alice")
    others = [api.login("alice").body["token"] for _ in range(3)]
    body = {"password": PASSWORD, "newPassword": "battery staple", "confirmNewPassword": "battery staple"}
    assert api.call("PUT", "/users/me/password", body, token=token).status == 200

    stack.sweep()

    assert store.stored(store.user(token).id) == {token.split(".")[1]}
    assert all(api.call("GET", "/users/me", token=t).status == 401 for t in others)
    assert api.call("GET", "/users/me", token=token).status == 200


def test_a_deleted_users_leftover_sessions_are_all_removed(api: Api, stack: Stack, store: Store) -> None:
    user = store.user(register(api, "alice"))
    store.add_sessions(user, 40)
    user = store.revoke_all(user)
    store.add_sessions(user, 5)
    stack.sweep()
    # The user goes without its sessions, as a fault after DELETE /users/me's transaction leaves it.
    store.tx.commit(store.users.delete_ops(user))
    assert len(store.stored(user.id)) == 5

    invocations = stack.sweep()

    assert keys_of(invocations) == [("REMOVE", f"USER#{user.id}")]  # not the claims' REMOVEs
    assert store.stored(user.id) == set()
    assert api.register("alice", ip="192.0.2.99").status == 201  # the name was free at once, as before


def test_claim_changes_and_new_users_do_not_invoke_the_sweeper(api: Api, stack: Stack, store: Store) -> None:
    register(api, "bob")  # INSERTs of the user and both claims
    stack.dynamodb.delete_item(TableName=stack.table("UsersTable"), Key={"pk": {"S": "USERNAME#bob"}})
    stack.dynamodb.put_item(
        TableName=stack.table("UsersTable"), Item={"pk": {"S": "USERNAME#bobby"}, "userId": {"S": "x"}}
    )

    assert stack.sweep() == []


def test_a_username_change_sweeps_its_user_item_only(api: Api, stack: Stack, store: Store) -> None:
    token = register(api, "carol")
    body = {"username": "carolyn", "password": PASSWORD}
    assert api.call("PUT", "/users/me/username", body, token=token).status == 200

    invocations = stack.sweep()

    assert keys_of(invocations) == [("MODIFY", f"USER#{store.user(token).id}")]
    assert store.stored(store.user(token).id) == {token.split(".")[1]}  # nothing stale: kept


@pytest.mark.usefixtures("fast_backoff")
def test_a_batch_write_fault_mid_sweep_is_reported_and_the_retry_completes(
    api: Api, stack: Stack, store: Store, faults: Faults
) -> None:
    user = store.user(register(api, "dave"))
    store.add_sessions(user, 99)  # 100 stale with the registration's: four batches of 25
    user = store.revoke_all(user)
    current = store.add_sessions(user, 2)
    faults.fail("dynamodb", "BatchWriteItem", "ProvisionedThroughputExceededException", 400, after=2)

    [failed] = stack.sweep()

    [record] = failed.records
    assert failed.answer == {"batchItemFailures": [{"itemIdentifier": record["dynamodb"]["SequenceNumber"]}]}
    assert len(store.stored(user.id)) == 100 - 50 + 2  # two batches went before the fault
    faults.clear()

    [retried] = stack.sweep()  # the event source mapping invokes the failed record again

    assert retried.records == failed.records
    assert retried.failures == []
    assert store.stored(user.id) == {s.id for s in current}
    assert stack.sweep() == []


def test_a_batch_that_keeps_failing_goes_to_the_dead_letter_queue_after_the_retries(
    api: Api, stack: Stack, store: Store, faults: Faults
) -> None:
    user = store.user(register(api, "erin"))
    store.revoke_all(user)
    faults.fail("dynamodb", "Query")
    retries = stack.feed("SweepFunction").subscription.maximum_retry_attempts

    invocations = [i for _ in range(retries + 1) for i in stack.sweep()]

    assert len(invocations) == retries + 1
    assert all(i.failures for i in invocations)
    [letter] = read_queue(stack, "SweepDeadLetterQueue")
    info = letter["DDBStreamBatchInfo"]
    sequence = invocations[0].records[0]["dynamodb"]["SequenceNumber"]
    assert (info["startSequenceNumber"], info["batchSize"]) == (sequence, 1)
    assert letter["requestContext"]["condition"] == "RetryAttemptsExhausted"
    assert user.id not in json.dumps(letter)  # where the records are, never what they say
    faults.clear()
    assert stack.sweep() == []  # given up on: the feed moved on
    assert len(store.stored(user.id)) == 1  # the stale session waits for its TTL or the next change
    store.revoke_all(store.user_by_id(user.id))
    stack.sweep()
    assert store.stored(user.id) == set()


def read_queue(stack: Stack, logical_id: str) -> list[dict[str, Any]]:
    sqs = boto3.client("sqs", region_name="us-east-1")
    url = stack.provisioned.queues[logical_id]
    return [json.loads(m["Body"]) for m in take_messages(sqs, url)]
