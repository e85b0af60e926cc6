"""Tokens are opaque, carry 256 random bits, and are only ever stored hashed."""

from __future__ import annotations

import pytest

from nimbus_core.platform.ids import is_id, is_session_id, new_id, new_secret, session_order
from nimbus_core.sessions.tokens import hash_secret, new_session_token, parse_session_token, secret_matches


def test_ids_are_url_safe_time_ordered_and_unique() -> None:
    made = [new_id() for _ in range(2000)]
    assert len(set(made)) == len(made)
    assert all(is_id(i) and len(i) == 26 for i in made)
    millis = [m[:10] for m in made]  # the first 10 characters encode the creation millisecond
    assert millis == sorted(millis)


def test_secrets_carry_256_bits() -> None:
    secret = new_secret()
    assert len(secret) == 43  # 32 bytes, base64url without padding
    assert len({new_secret() for _ in range(100)}) == 100


def test_token_round_trips_through_both_header_forms() -> None:
    token = new_session_token(new_id(), new_id())
    assert parse_session_token(str(token)) == token
    assert parse_session_token(f"Bearer {token}") == token
    assert parse_session_token(f"bearer   {token}") == token


ID_A, ID_B = "01M83M99VZ0PQ19JM98VB8SN17", "01M83M99VZTVNSX1PFTSR1WXA6"


@pytest.mark.parametrize(
    "raw",
    [
        None,
        "",
        "garbage",
        "a.b.c",
        "Bearer",
        # Fixed ids, not new_id(): values made at collection time differ between xdist workers.
        f"{ID_A}.{ID_B}",
        f"{ID_A}.{ID_B}.short",
        f"{ID_A}.{ID_B}.{'x' * 43}.extra",
        "x" * 10_000,
        f"{ID_A.lower()}.{ID_B}.{'x' * 43}",
    ],
)
def test_malformed_tokens_parse_to_nothing(raw: str | None) -> None:
    assert parse_session_token(raw) is None


def test_secret_is_compared_against_its_hash() -> None:
    secret = new_secret()
    stored = hash_secret(secret)
    assert stored != secret
    assert secret_matches(secret, stored)
    assert not secret_matches(new_secret(), stored)


# An upstream session's id: its token's iat, a decimal string (CONTRACT section 15).
IAT = "1764000000"


@pytest.mark.parametrize("value", [IAT, "1", "999999999999", ID_A])
def test_imported_upstream_session_ids_are_session_ids(value: str) -> None:
    assert is_session_id(value)


@pytest.mark.parametrize(
    "value",
    [
        "",
        "0",
        "01764000000",
        "1764000000 ",
        "+1764000000",
        "1" * 13,
        "\u0661\u0667\u0666\u0664",
        ID_A.lower(),
        "me",
    ],
)
def test_malformed_session_ids_are_refused_before_any_read(value: str) -> None:
    assert not is_session_id(value)


def test_imported_session_ids_order_by_their_creation_second_among_nimbus_ids() -> None:
    made = new_id()  # now
    older, newer = "1000000000", "99999999999"  # 2001, and the year 5138: before and after it

    assert sorted([newer, made, older], key=session_order) == [older, made, newer]
    assert session_order(made) == made  # a Nimbus id is its own order


def test_a_nimbus_token_never_names_an_imported_upstream_session() -> None:
    """An imported session is reached only through its upstream JWT: a token of ours naming one
    is malformed, refused before any read."""
    assert parse_session_token(f"1700000000000.{IAT}.{'x' * 43}") is None
    assert parse_session_token(f"1700000000000.{ID_A}.{'x' * 43}") is not None
