"""``nimbus totp reseal [--key KEY]``: every stored TOTP secret sealed under one KMS key.

Moving to another key (docs/operations.md, "Moving TOTP secrets to another key"): deploy with
``TotpSealingKeyArn`` naming the new key and ``TotpPreviousKeyArn`` the old one (new seals use the
new key, and the functions still open the old ones), run this, then deploy without the previous
key. It also seals the plaintext secrets of stacks deployed before sealing existed.

Each secret is opened with the key its sealed form names and sealed again under ``KEY`` (default:
the key the stack's functions seal with) for the same user and factor, in one conditional
UpdateItem: it lands only if the secret is still the one read (a concurrent removal, re-enrolment
or another run is re-read and re-judged, never overwritten). A secret already under ``KEY`` is left
alone, so a second run, or a run after an interrupted one, writes only what is left: the command
is idempotent and resumable by running it again. Pending enrolments (the tokens table) are
resealed too. The run makes one data key (one GenerateDataKey) and opens each older data key once.
"""

from __future__ import annotations

import argparse
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from nimbus_core.adapters.items import from_item, read_record
from nimbus_core.adapters.sealing import Sealer, is_sealed
from nimbus_core.adapters.user_factors import totp_secret_attribute
from nimbus_core.domain.models import PendingFactor, User
from nimbus_core.domain.ports import SealError
from nimbus_core.factors.seeds import pending_binding
from nimbus_tools.cli.target import CliError

if TYPE_CHECKING:
    from nimbus_tools.cli.commands import TargetFactory
    from nimbus_tools.cli.target import Target

_ATTEMPTS = 5  # a secret changed under us this many times in a row is left for the next run


@dataclass
class ResealReport:
    """What a run did, per kind of secret."""

    key: str
    resealed: int = 0  # sealed under another key before, under ``key`` now
    sealed_plaintext: int = 0  # stored in the clear before (a stack deployed before sealing)
    already: int = 0  # under ``key`` already: left alone
    raced: int = 0  # changed meanwhile (re-read and judged again)
    failed: list[str] = field(default_factory=list)  # "<where>: <why>", never a secret

    def render(self) -> str:
        """The report as the command prints it."""
        lines = [
            f"TOTP secrets under {self.key}:",
            f"  resealed from another key: {self.resealed}",
            f"  sealed (were in plaintext): {self.sealed_plaintext}",
            f"  already under it: {self.already}",
        ]
        if self.raced:
            lines.append(f"  changed during the run, judged again: {self.raced}")
        lines += [f"  NOT resealed: {failure}" for failure in self.failed]
        return "\n".join(lines)


@dataclass(frozen=True)
class _Slot:
    """Where one secret is stored, and how to tell it is still the one read."""

    table: str
    key: dict[str, Any]
    path: str  # the attribute (an expression name placeholder path) holding the sealed form
    names: dict[str, str]
    user_id: str
    binding: str  # the factor (or pending enrolment) it is bound to
    plaintext_path: str | None = None  # where a plaintext secret is stored instead, if it is


def command(args: argparse.Namespace, target: TargetFactory) -> str:
    """``totp reseal [--key KEY]``: run and answer the report."""
    stack = target()
    report = reseal(stack, key=getattr(args, "key", None))
    return report.render()


def reseal(stack: Target, *, key: str | None = None) -> ResealReport:
    """Seal every stored TOTP secret of ``stack`` under ``key`` (an id, ARN or alias; default the
    key the stack's functions seal with)."""
    if not (key or stack.totp_key) or not stack.stage:
        raise CliError(
            f"{stack.description} names no TOTP key or stage: give --key (and deploy this release)"
        )
    sealer = stack.sealer(key)
    kms = stack.kms()
    key_arn = kms.describe_key(KeyId=sealer.key_id)["KeyMetadata"]["Arn"]
    report = ResealReport(key=key_arn)
    dynamodb = stack.dynamodb()
    users, tokens = stack.table("UsersTable"), stack.table("TokensTable")
    for item in _scan(dynamodb, users, "USER#"):
        user = read_record(User, item)
        for factor in user.second_factors.values():
            if factor.type != "totp":
                continue
            attribute = totp_secret_attribute(factor.id)
            slot = _Slot(
                table=users,
                key={"pk": item["pk"]},
                path="#s",
                names={"#s": attribute, "#sf": "secondFactors", "#f": factor.id},
                user_id=user.id,
                binding=factor.id,
                plaintext_path="#sf.#f.secret",
            )
            _reseal_one(dynamodb, sealer, key_arn, slot, report)
    for item in _scan(dynamodb, tokens, "ENROL#"):
        pending = read_record(PendingFactor, item)
        if pending.type == "totp" and pending.secret:
            slot = _Slot(
                table=tokens,
                key={"pk": item["pk"]},
                path="#s",
                names={"#s": "secret"},
                user_id=pending.user_id,
                binding=pending_binding(pending.hash),
            )
            _reseal_one(dynamodb, sealer, key_arn, slot, report)
    return report


def _scan(dynamodb: Any, table: str, prefix: str) -> Any:
    """Every item of ``table`` whose key starts with ``prefix`` (a Scan: an operator's run)."""
    pages = dynamodb.get_paginator("scan").paginate(
        TableName=table,
        ConsistentRead=True,
        FilterExpression="begins_with(pk, :p)",
        ExpressionAttributeValues={":p": {"S": prefix}},
    )
    for page in pages:
        yield from page.get("Items", [])


def _reseal_one(dynamodb: Any, sealer: Sealer, key_arn: str, slot: _Slot, report: ResealReport) -> None:
    """Seal one secret under ``key_arn`` unless it is already, re-reading it when it changed."""
    for _ in range(_ATTEMPTS):
        item = dynamodb.get_item(TableName=slot.table, Key=slot.key, ConsistentRead=True).get("Item")
        stored, plaintext = _read(item, slot)
        if stored is None and plaintext is None:
            return  # removed meanwhile (or never had one): nothing to seal
        if stored is not None and is_sealed(stored) and sealer.sealed_with(stored) == key_arn:
            report.already += 1
            return
        try:
            secret = _open(sealer, stored, plaintext, slot)
        except SealError as refused:
            report.failed.append(f"{slot.table} {slot.key['pk']['S']} factor {slot.binding}: {refused}")
            return
        sealed = sealer.seal(secret, user_id=slot.user_id, factor_id=slot.binding)
        if _write(dynamodb, slot, sealed, stored=stored, plaintext=plaintext):
            if stored is not None and is_sealed(stored):
                report.resealed += 1
            else:
                report.sealed_plaintext += 1
            return
        report.raced += 1
    report.failed.append(f"{slot.table} {slot.key['pk']['S']} factor {slot.binding}: kept changing")


def _read(item: dict[str, Any] | None, slot: _Slot) -> tuple[str | None, str | None]:
    """The secret stored in ``slot`` (sealed, or in the pending item plaintext) and a plaintext
    one stored in the factor by releases before sealing."""
    if item is None:
        return None, None
    values = from_item(item)
    stored = values.get(slot.names["#s"])
    plaintext = None
    if slot.plaintext_path is not None:
        factor = (values.get("secondFactors") or {}).get(slot.names["#f"])
        if factor is None:
            return None, None  # the factor was removed: its secret goes with it
        plaintext = factor.get("secret")
    return stored, plaintext


def _open(sealer: Sealer, stored: str | None, plaintext: str | None, slot: _Slot) -> str:
    if stored is not None and is_sealed(stored):
        return sealer.unseal(stored, user_id=slot.user_id, factor_id=slot.binding)
    return stored if stored is not None else plaintext or ""


def _write(dynamodb: Any, slot: _Slot, sealed: str, *, stored: str | None, plaintext: str | None) -> bool:
    """The conditional write of the secret ``sealed`` anew; False when it changed since read."""
    names = dict(slot.names)
    values: dict[str, Any] = {":new": {"S": sealed}}
    update = f"SET {slot.path} = :new"
    conditions = []
    if stored is None:
        conditions.append(f"attribute_not_exists({slot.path})")
    else:
        conditions.append(f"{slot.path} = :old")
        values[":old"] = {"S": stored}
    if slot.plaintext_path is not None:
        conditions.append(f"attribute_exists({slot.plaintext_path.rsplit('.', 1)[0]})")
        if plaintext is not None:
            update += f" REMOVE {slot.plaintext_path}"
            conditions.append(f"{slot.plaintext_path} = :plain")
            values[":plain"] = {"S": plaintext}
    try:
        dynamodb.update_item(
            TableName=slot.table,
            Key=slot.key,
            UpdateExpression=update,
            ConditionExpression=" AND ".join(conditions),
            ExpressionAttributeNames=_used(names, update, conditions),
            ExpressionAttributeValues=values,
        )
    except ClientError as error:
        if error.response["Error"]["Code"] == "ConditionalCheckFailedException":
            return False
        raise
    return True


def _used(names: dict[str, str], update: str, conditions: list[str]) -> dict[str, str]:
    """The expression names the expressions use (DynamoDB refuses unused ones)."""
    text = " ".join([update, *conditions])
    return {k: v for k, v in names.items() if k in text}
