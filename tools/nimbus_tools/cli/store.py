"""AWS access of the CLI, through the same adapters as the functions (no second copy of the schema)."""

from __future__ import annotations

from nimbus_core import clock
from nimbus_core.adapters.domains import DynamoDomains
from nimbus_core.adapters.transactions import DynamoTransactor
from nimbus_core.adapters.users import DynamoUsers
from nimbus_core.errors import NimbusError
from nimbus_core.killswitches import KillSwitch, parse_enabled, serialize_enabled
from nimbus_core.models import Domain, User
from nimbus_tools.cli.target import Target


def _users(target: Target) -> DynamoUsers:
    return DynamoUsers(target.dynamodb(), target.table("UsersTable"))


def _domains(target: Target) -> DynamoDomains:
    return DynamoDomains(target.dynamodb(), target.table("DomainsTable"))


def find_user(target: Target, username: str) -> User | None:
    """The user with ``username`` (case-insensitive), or None if nobody has it."""
    return _users(target).find_by_username(username)


def set_staff(target: Target, user: User, staff: bool) -> bool:
    """Set the user's staff flag; False if the user was deleted meanwhile."""
    if user.staff == staff:
        return True
    after: User = user.changed(staff=staff, updated_at=clock.iso(clock.now()))
    try:
        DynamoTransactor(target.dynamodb()).commit(_users(target).change_ops(user, after))
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
    """The kill switches currently on."""
    return parse_enabled(read_parameter(target, "KillSwitchParameter"))


def write_killswitches(target: Target, enabled: frozenset[KillSwitch]) -> None:
    """Store the set of enabled kill switches."""
    write_parameter(target, "KillSwitchParameter", serialize_enabled(enabled))


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
