"""The CLI's commands: validate input, call the store, return the text to print."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from nimbus_tools.cli import render, store
from nimbus_tools.cli.errors import EXIT_USAGE, CliError
from nimbus_tools.cli.inputs import normalize_domain, parse_killswitch, parse_loglevel
from nimbus_tools.cli.target import Target
from nimbus_tools.local.control import ControlError, read_mail

# Commands get the target lazily so bad input is refused before any AWS call (and even when the
# local API is not running).
TargetFactory = Callable[[], Target]


def staff(action: str, username: str, target: TargetFactory) -> str:
    """``staff promote|demote USERNAME``."""
    promote = action == "promote"
    resolved = target()
    user = store.find_user(resolved, username)
    if user is None or not store.set_staff(resolved, user, promote):
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
    """``killswitch list|enable NAME|disable NAME``."""
    if action == "list":
        return render.killswitch_table(store.enabled_killswitches(target()))
    switch = parse_killswitch(name or "")
    resolved = target()
    on = action == "enable"
    changed = (switch in store.enabled_killswitches(resolved)) != on
    if changed:
        store.set_killswitch(resolved, switch, on)
    return render.killswitch_change(switch, on, changed=changed)


def loglevel(action: str, level: str | None, target: TargetFactory) -> str:
    """``loglevel get|set LEVEL``."""
    if action == "get":
        return store.read_parameter(target(), "LogLevelParameter")
    canonical = parse_loglevel(level or "")
    resolved = target()
    previous = store.read_parameter(resolved, "LogLevelParameter")
    store.write_parameter(resolved, "LogLevelParameter", canonical)
    return f"log level is now {canonical} (was {previous})"


def domain(action: str, name: str | None, subdomains: bool, target: TargetFactory) -> str:
    """``domain list|add NAME [--subdomains]|remove NAME``."""
    if action == "list":
        return render.domain_table(store.list_domains(target()))
    normalized = normalize_domain(name or "")
    resolved = target()
    if action == "add":
        created = store.upsert_domain(resolved, normalized, subdomains)
        allowed = "subdomains allowed" if subdomains else "no subdomains"
        return f"{'added' if created else 'updated'} {normalized} ({allowed})"
    if not store.delete_domain(resolved, normalized):
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
    if as_json:
        return json.dumps(messages, indent=2)
    return render.mail_list(messages)


def status(target: TargetFactory) -> str:
    """``status``: what the deployed alarms watch, read directly: messages waiting in each
    dead-letter queue, the kill switches that are on, and the log level."""
    resolved = target()
    waiting = store.waiting_messages(resolved)
    enabled = store.enabled_killswitches(resolved)
    level = store.read_parameter(resolved, "LogLevelParameter")
    return render.status(resolved.description, waiting, enabled, level)
