"""Text the CLI prints: tables and mail, built from plain data (no AWS access here)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING, Any

from nimbus_core.domain.killswitches import KillSwitch

if TYPE_CHECKING:
    from nimbus_core.domain.models import Domain


def table(
    headers: Sequence[str],
    rows: Iterable[Sequence[str]],
    right: frozenset[int] = frozenset(),
    *,
    rule: bool = False,
) -> str:
    """Columns separated by two spaces, left-aligned but those whose index is in ``right`` (numbers
    read better that way); with ``rule``, a line of dashes under the headers."""
    materialized = [list(headers), *(list(r) for r in rows)]
    widths = [max(len(row[i]) for row in materialized) for i in range(len(headers))]
    lines = [
        "  ".join(
            cell.rjust(width) if i in right else cell.ljust(width)
            for i, (cell, width) in enumerate(zip(row, widths, strict=True))
        ).rstrip()
        for row in materialized
    ]
    if rule:
        lines.insert(1, "  ".join("-" * width for width in widths))
    return "\n".join(lines)


def killswitch_table(enabled: frozenset[KillSwitch]) -> str:
    """Every kill switch with its number and on/off."""
    return table(
        ("NAME", "NUMBER", "STATE"),
        ((s.name, str(s.value), "on" if s in enabled else "off") for s in KillSwitch),
    )


def domain_table(domains: Sequence[Domain]) -> str:
    """The offered domains, or a note that there are none."""
    if not domains:
        return "no domains (add one with `nimbus domain add NAME`)"
    return table(
        ("DOMAIN", "SUBDOMAINS", "CREATED"),
        ((d.id, "yes" if d.subdomains else "no", d.created_at) for d in domains),
    )


def mail_list(messages: Sequence[dict[str, Any]]) -> str:
    """Captured emails, oldest first, each with its text body so a link can be copied."""
    if not messages:
        return "no mail captured yet"
    blocks = []
    for number, message in enumerate(messages, start=1):
        body = message.get("text") or message.get("html") or "(empty body)"
        lines = [
            f"#{number}  {message.get('timestamp', '')}",
            f"From:    {message.get('from', '')}",
            f"To:      {', '.join(message.get('to') or [])}",
            f"Subject: {message.get('subject', '')}",
            "",
            str(body).rstrip(),
        ]
        blocks.append("\n".join(lines))
    return ("\n\n" + "-" * 72 + "\n\n").join(blocks)


def status(description: str, waiting: dict[str, int], enabled: frozenset[KillSwitch], level: str) -> str:
    """The stack's state at a glance; a line starting with ``!`` is one to act on."""
    lines = [f"stack: {description}"]
    for queue, count in waiting.items():
        mark = "!" if count else " "
        hint = "  (nimbus mail failed)" if count and queue == "MailDeadLetterQueue" else ""
        lines.append(f"{mark} {queue}: {count} message(s) waiting{hint}")
    switches = ", ".join(f"{s.name} ({s.value})" for s in KillSwitch if s in enabled)
    lines.append(f"{'!' if enabled else ' '} kill switches on: {switches or 'none'}")
    lines.append(f"  log level: {level}")
    return "\n".join(lines)
