"""AWS access of the CLI, through the same adapters as the functions (no second copy of the schema)."""

from __future__ import annotations

from nimbus_core.accounts.notices import OPERATOR, Notice, compose
from nimbus_core.adapters.domains import DynamoDomains
from nimbus_core.adapters.outbox import DynamoOutbox
from nimbus_core.adapters.transactions import DynamoTransactor
from nimbus_core.adapters.users import DynamoUsers
from nimbus_core.domain.errors import NimbusError
from nimbus_core.domain.killswitches import KillSwitch, enabled_in, stored_value
from nimbus_core.domain.models import Domain, User
from nimbus_core.platform import clock
from nimbus_tools.cli.errors import CliError
from nimbus_tools.cli.target import Target


def _users(target: Target) -> DynamoUsers:
    return DynamoUsers(target.dynamodb(), target.table("UsersTable"))


def _domains(target: Target) -> DynamoDomains:
    return DynamoDomains(target.dynamodb(), target.table("DomainsTable"))


def find_user(target: Target, username: str) -> User | None:
    """The user with ``username`` (case-insensitive), or None if nobody has it."""
    return _users(target).find_by_username(username)


def set_staff(target: Target, user: User, staff: bool) -> bool:
    """Set the user's staff flag and queue the security notice the API's staff change sends, in one
    transaction (nothing is sent when nothing changes); False if the user was deleted meanwhile."""
    if user.staff == staff:
        return True
    now = clock.now()
    after: User = user.changed(staff=staff, updated_at=clock.iso(now))
    notice = Notice.STAFF_GRANTED if staff else Notice.STAFF_REMOVED
    outbox = DynamoOutbox(target.dynamodb(), target.table("OutboxTable"))
    told = outbox.enqueue_op(
        compose(after, notice, actor=OPERATOR, now=now), now=now, kind=notice.kind, user_id=user.id
    )
    try:
        DynamoTransactor(target.dynamodb()).commit([*_users(target).change_ops(user, after), told])
    except NimbusError:
        return False
    return True


def read_parameter(target: Target, logical_id: str) -> str:
    """The current value of an SSM parameter of the stack."""
    return target.ssm().get_parameter(Name=target.parameter(logical_id))["Parameter"]["Value"]


def write_parameter(target: Target, logical_id: str, value: str) -> None:
    """Replace the value of an SSM parameter of the stack."""
    target.ssm().put_parameter(Name=target.parameter(logical_id), Value=value, Type="String", Overwrite=True)


def enabled_killswitches(target: Target) -> frozenset[KillSwitch]:
    """The kill switches currently on (one GetParameters call, as the functions read them)."""
    names = target.killswitch_parameters()
    found = target.ssm().get_parameters(Names=list(names.values()))["Parameters"]
    values = {p["Name"]: p.get("Value", "") for p in found}
    missing = sorted(name for name in names.values() if name not in values)
    if missing:
        raise CliError(f"{target.description} has no parameter {', '.join(missing)}")
    return enabled_in(values, names)


def set_killswitch(target: Target, switch: KillSwitch, on: bool) -> None:
    """Turn one kill switch on or off, writing its own parameter only (CONTRACT 11)."""
    name = target.killswitch_parameters()[switch]
    target.ssm().put_parameter(Name=name, Value=stored_value(on), Type="String", Overwrite=True)


def list_domains(target: Target) -> list[Domain]:
    """Every offered domain, sorted by name."""
    return _domains(target).list()


def upsert_domain(target: Target, domain: str, allows_subdomains: bool) -> bool:
    """Offer ``domain`` (or change whether it allows subdomains); True if it was new."""
    return _domains(target).put(domain, subdomains=allows_subdomains, now=clock.iso(clock.now()))


def delete_domain(target: Target, domain: str) -> bool:
    """Stop offering ``domain``; False if it was not offered."""
    return _domains(target).delete(domain)


def waiting_messages(target: Target) -> dict[str, int]:
    """How many messages wait in each dead-letter queue of the stack (logical id -> count)."""
    counts: dict[str, int] = {}
    for logical_id, url in sorted(target.queues.items()):
        attributes = target.sqs().get_queue_attributes(
            QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"]
        )["Attributes"]
        counts[logical_id] = int(attributes.get("ApproximateNumberOfMessages", "0"))
    return counts
