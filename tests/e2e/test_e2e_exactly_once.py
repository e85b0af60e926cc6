"""Exactly-once rules at 30-way concurrency over HTTP against the local API, one test per kind of
single use: a TOTP code (a compare-and-set on the user item) and a challenge token (a take from the
single-use-secret store) each work once however many requests race for them.

The other single uses are the same kinds, proven on the fakes and on moto: a backup code is spent by
a conditional write of the user item
(tests/contract/test_second_factors_contract.py::test_backup_codes_are_replaced_as_a_set_and_spent_once,
tests/integration/test_second_factor_challenge.py::test_a_backup_code_works_once_and_is_recorded);
an emailed verification token is taken from the same store as a challenge
(tests/contract/test_single_use_secrets_contract.py,
tests/unit/test_account_rules.py::test_verify_is_single_use),
and a reset token races over HTTP in test_e2e_recovery.py. A rate limit under concurrency is the
counted-limit kind: test_e2e_concurrency.py and test_e2e_sessions.py race it over HTTP."""

from __future__ import annotations

import time
from collections import Counter

import pytest

from tests.api_client import Reply, new_ip
from tests.e2e.conftest import Client, parallel, with_totp

PASSWORD = "correct horse"
WAYS = 30


# After every race here, the users table is whole (tests/invariants.py).
pytestmark = pytest.mark.usefixtures("stack_whole")


def _challenges(client: Client, name: str, count: int) -> list[str]:
    """``count`` login challenges of one user, each from its own address (the per-IP limit)."""
    tokens = []
    for _ in range(count):
        first = client.login(name, PASSWORD, ip=new_ip())
        assert first.body["code"] == "SECOND_FACTOR_CHALLENGE_REQUIRED_ERROR", first.body
        tokens.append(first.body["token"])
    return tokens


# What the losers of a race for one code hear: a used code, or, after ten failed answers, the
# per-account lock (failed second-factor answers count toward it, whoever sends them).
LOST = {(401, "INVALID_SECOND_FACTOR_RESPONSE_ERROR"), (429, "RATELIMITED_ERROR")}


def _exactly_one_session(replies: list[Reply]) -> None:
    outcomes = Counter((r.status, r.body.get("code")) for r in replies)
    assert outcomes[(201, None)] == 1, outcomes
    assert set(outcomes) - {(201, None)} <= LOST, outcomes


def _answer(client: Client, challenge: str, kind: str, code: str) -> Reply:
    return client.call(
        "POST", "/login", {"2fa": {"token": challenge, "type": kind, "code": code}}, ip=new_ip()
    )


def test_one_totp_code_answers_one_of_thirty_racing_challenges(client: Client) -> None:
    name, _, totp, _ = with_totp(client)
    challenges = _challenges(client, name, WAYS)
    code = totp.at(time.time() + 30)  # the next step: the current one was used up by the confirmation

    replies = parallel(WAYS, lambda i: _answer(client, challenges[i], "totp", code))

    _exactly_one_session(replies)


def test_one_challenge_token_opens_one_session_whatever_thirty_right_answers_race(client: Client) -> None:
    name, _, _, codes = with_totp(client)
    (challenge,) = _challenges(client, name, 1)

    # Thirty different right answers (ten backup codes, three times each) to the same challenge.
    replies = parallel(WAYS, lambda i: _answer(client, challenge, "backup", codes[i % len(codes)]))

    _exactly_one_session(replies)
