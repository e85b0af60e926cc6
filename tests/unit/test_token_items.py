"""Every kind of single-use secret keeps the item layout it had when each kind had a store of its
own (``CHALLENGE#``/``challenge``, ``ENROL#``/``enrol``, ``VERIFY#``/``verify-email``,
``RECOVER#``/``recovery``), so items written before one store kept them all are read, used up and
removed by it: no migration."""

from __future__ import annotations

from typing import Any, cast

import pytest

from nimbus_core.adapters.tokens import DynamoTokens
from nimbus_core.adapters.transactions import TransactOp
from nimbus_core.domain.models import Challenge, PendingFactor, RecoveryToken, VerificationToken
from nimbus_core.domain.secret_kinds import (
    CHALLENGE,
    EMAIL_VERIFICATION,
    ENROLMENT,
    RECOVERY,
    SecretKind,
    SingleUseSecret,
)
from tests.samples import STAMP

HASH = "ab" * 32
SECRETS: list[tuple[SecretKind[Any], SingleUseSecret, str, str]] = [
    (
        CHALLENGE,
        Challenge(hash=HASH, user_id="u", endpoint="POST /login", created_at=STAMP, exp=9),
        "CHALLENGE#",
        "challenge",
    ),
    (
        ENROLMENT,
        PendingFactor(hash=HASH, user_id="u", session_id="s", type="totp", created_at=STAMP, exp=9),
        "ENROL#",
        "enrol",
    ),
    (
        EMAIL_VERIFICATION,
        VerificationToken(hash=HASH, user_id="u", email="a@b.c", created_at=STAMP, exp=9),
        "VERIFY#",
        "verify-email",
    ),
    (
        RECOVERY,
        RecoveryToken(hash=HASH, user_id="u", email="a@b.c", password_digest="d", created_at=STAMP, exp=9),
        "RECOVER#",
        "recovery",
    ),
]


def _op(write: object) -> dict[str, Any]:
    return cast("TransactOp", write).op


@pytest.mark.parametrize(("kind", "secret", "prefix", "tag"), SECRETS, ids=lambda v: getattr(v, "name", None))
def test_each_kind_of_secret_is_stored_read_and_removed_under_its_old_key_and_kind(
    kind: SecretKind[Any], secret: SingleUseSecret, prefix: str, tag: str
) -> None:
    tokens = DynamoTokens(cast("Any", None), "tokens", "users")  # builds ops only: no call is made

    put = _op(tokens.put_op(kind, secret))["Put"]
    taken = _op(tokens.take_op(kind, HASH, max_attempts=5))["Delete"]
    dropped = _op(tokens.drop_op(kind, HASH))["Delete"]

    assert (put["Item"]["pk"], put["Item"]["kind"], put["Item"]["expiresAt"]) == (
        {"S": f"{prefix}{HASH}"},
        {"S": tag},
        {"N": "9"},
    )
    assert put["ConditionExpression"] == "attribute_not_exists(pk)"
    assert taken["Key"] == dropped["Key"] == {"pk": {"S": f"{prefix}{HASH}"}}
