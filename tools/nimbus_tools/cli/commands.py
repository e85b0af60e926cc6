"""The CLI's commands: check what the operator typed, act through the functions' own adapters (no
second copy of the schema), return the text to print."""

from __future__ import annotations

import json
import re
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from nimbus_core.domain.errors import NimbusError
from nimbus_core.domain.killswitches import KillSwitch, by_id, enabled_in, stored_value
from nimbus_core.domain.loglevels import LEVELS, normalize
from nimbus_core.platform import clock
from nimbus_tools.cli import render
from nimbus_tools.cli.target import EXIT_USAGE, CliError, Target
from nimbus_tools.local.control import ControlError, read_mail

# The adapters (and the staff notices) are imported by the commands that use them: `killswitch`,
# `loglevel`, `status` and `mail list` need none (each `nimbus` run is a new process, which pays for
# all it imports).
if TYPE_CHECKING:
    from nimbus_core.adapters.domains import DynamoDomains
    from nimbus_core.adapters.users import DynamoUsers
    from nimbus_core.domain.models import User

# Commands get the target lazily so bad input is refused before any AWS call (and even when the
# local API is not running).
TargetFactory = Callable[[], Target]
_LABEL = re.compile(r"^(?!-)[a-z0-9-]{1,63}(?<!-)$")
LOG_LEVEL = "LogLevelParameter"


def parse_killswitch(name: str) -> KillSwitch:
    """A kill switch from its name (any case) or its number in canonical decimal (``4``, never
    ``04`` or ``٤``, as the API); unknown names exit 2 listing valid ones."""
    text = name.strip()
    member = by_id(text)  # (ACCOUNT_CREATE is 0, which is falsy: compared with None, not "or")
    if member is None:
        member = KillSwitch.__members__.get(text.upper().replace("-", "_"))
    if member is not None:
        return member
    valid = ", ".join(f"{s.name} ({s.value})" for s in KillSwitch)
    raise CliError(f"unknown kill switch {name!r}; valid: {valid}", EXIT_USAGE)


def normalize_domain(name: str) -> str:
    """A domain as stored: lower-case, no trailing dot, IDNs in punycode (as DNS carries them);
    bad syntax exits 2."""
    domain = name.strip().lower().removesuffix(".")
    try:
        domain = domain.encode("idna").decode("ascii")
    except UnicodeError:
        raise CliError(f"{name!r} is not a valid domain name", EXIT_USAGE) from None
    labels = domain.split(".")
    # (an IP address is not a domain)
    if not 0 < len(domain) <= 253 or not all(map(_LABEL.match, labels)) or labels[-1].isdigit():
        raise CliError(f"{name!r} is not a valid domain name", EXIT_USAGE)
    return domain


def _users(target: Target) -> DynamoUsers:
    from nimbus_core.adapters.users import DynamoUsers

    return DynamoUsers(target.dynamodb(), target.table("UsersTable"))


def _domains(target: Target) -> DynamoDomains:
    from nimbus_core.adapters.domains import DynamoDomains

    return DynamoDomains(target.dynamodb(), target.table("DomainsTable"))


def set_staff(target: Target, user: User, staff: bool) -> bool:
    """Set the user's staff flag and queue the security notice the API's staff change sends, in one
    transaction (nothing is sent when nothing changes); False if the user was deleted meanwhile."""
    if user.staff == staff:
        return True
    from nimbus_core.accounts.notices import OPERATOR, Notice, compose
    from nimbus_core.adapters.outbox import DynamoOutbox
    from nimbus_core.adapters.transactions import DynamoTransactor

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


def enabled_killswitches(target: Target) -> frozenset[KillSwitch]:
    """The kill switches currently on (one GetParameters call, as the functions read them)."""
    names = target.killswitch_parameters()
    found = target.ssm().get_parameters(Names=list(names.values()))["Parameters"]
    values = {p["Name"]: p.get("Value", "") for p in found}
    missing = sorted(name for name in names.values() if name not in values)
    if missing:
        raise CliError(f"{target.description} has no parameter {', '.join(missing)}")
    return enabled_in(values, names)


def staff(action: str, username: str, target: TargetFactory) -> str:
    """``staff promote|demote USERNAME``."""
    promote = action == "promote"
    resolved = target()
    user = _users(resolved).find_by_username(username)
    if user is None or not set_staff(resolved, user, promote):
        raise CliError(f"no user named {username!r} in {resolved.description}")
    done = f"{username} is {'now' if promote else 'no longer'} staff (user {user.id})"
    if promote and user.second_factor_count == 0:
        # Staff endpoints answer ENDPOINT_REQUIRES_SECOND_FACTOR_ERROR until the user enrols one.
        done += (
            "\nnote: this user has no second factor yet; staff endpoints will refuse them until they "
            "enrol one (POST /users/me/2fa/totp)"
        )
    return done


def killswitch(action: str, name: str | None, target: TargetFactory) -> str:
    """``killswitch list|enable NAME|disable NAME``: each switch writes its own parameter only."""
    if action == "list":
        return render.killswitch_table(enabled_killswitches(target()))
    switch = parse_killswitch(name or "")
    resolved = target()
    on = action == "enable"
    changed = (switch in enabled_killswitches(resolved)) != on
    if changed:
        parameter = resolved.killswitch_parameters()[switch]
        resolved.ssm().put_parameter(Name=parameter, Value=stored_value(on), Type="String", Overwrite=True)
    state = "on" if on else "off"
    return f"{switch.name} ({switch.value}) {'is now' if changed else 'was already'} {state}"


def loglevel(action: str, level: str | None, target: TargetFactory) -> str:
    """``loglevel get|set LEVEL``."""
    if action == "get":
        return read_parameter(target(), LOG_LEVEL)
    canonical = normalize(level := level or "")
    if canonical is None:
        raise CliError(f"invalid log level {level!r}; valid: {', '.join(LEVELS)}", EXIT_USAGE)
    resolved = target()
    previous = read_parameter(resolved, LOG_LEVEL)
    resolved.ssm().put_parameter(
        Name=resolved.parameter(LOG_LEVEL), Value=canonical, Type="String", Overwrite=True
    )
    return f"log level is now {canonical} (was {previous})"


def domain(action: str, name: str | None, subdomains: bool, target: TargetFactory) -> str:
    """``domain list|add NAME [--subdomains]|remove NAME``."""
    if action == "list":
        return render.domain_table(_domains(target()).list())
    normalized = normalize_domain(name or "")
    resolved = target()
    if action == "add":
        created = _domains(resolved).put(normalized, subdomains=subdomains, now=clock.iso(clock.now()))
        allowed = "subdomains allowed" if subdomains else "no subdomains"
        return f"{'added' if created else 'updated'} {normalized} ({allowed})"
    if not _domains(resolved).delete(normalized):
        raise CliError(f"{normalized} is not an offered domain in {resolved.description}")
    return f"removed {normalized}"


def mail(to: str | None, as_json: bool, target: TargetFactory) -> str:
    """``mail list [--to ADDRESS] [--json]``: the local emulator's captured mail, oldest first."""
    resolved = target()
    if resolved.endpoint_url is None:
        raise CliError(
            "mail is only captured by the local API (`make serve`), not by a deployed stack", EXIT_USAGE
        )
    try:
        messages: list[dict[str, Any]] = read_mail(resolved.endpoint_url)
    except ControlError as error:
        raise CliError(str(error)) from None
    if to:
        wanted = to.strip().lower()
        messages = [m for m in messages if any(str(a).lower() == wanted for a in m.get("to") or [])]
    messages.sort(key=lambda m: str(m.get("timestamp", "")))
    return json.dumps(messages, indent=2) if as_json else render.mail_list(messages)


def status(target: TargetFactory) -> str:
    """``status``: what the deployed alarms watch, read directly: messages waiting in each
    dead-letter queue, the kill switches that are on, and the log level."""
    resolved = target()
    waiting: dict[str, int] = {}
    for logical_id, url in sorted(resolved.queues.items()):
        attributes = resolved.sqs().get_queue_attributes(
            QueueUrl=url, AttributeNames=["ApproximateNumberOfMessages"]
        )["Attributes"]
        waiting[logical_id] = int(attributes.get("ApproximateNumberOfMessages", "0"))
    enabled = enabled_killswitches(resolved)
    return render.status(resolved.description, waiting, enabled, read_parameter(resolved, LOG_LEVEL))
