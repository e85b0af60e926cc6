"""Emails sent through the emulator's SES, captured at the wire so people and tests can read them.

moto accepts SendEmail but nobody can read what was sent; the local API keeps every accepted
message here (``GET /_nimbus/mail``) so a developer can click a verification link.
"""

from __future__ import annotations

import json
import threading
import uuid
from dataclasses import dataclass, field
from typing import Any

from nimbus_core import clock


@dataclass
class CapturedEmail:
    """One accepted message."""

    sender: str
    to: list[str]
    subject: str
    text: str
    html: str
    id: str = field(default_factory=lambda: str(uuid.uuid4()))
    timestamp: str = field(default_factory=lambda: clock.iso(clock.now()))

    def as_json(self) -> dict[str, Any]:
        """The wire form of ``GET /_nimbus/mail`` entries."""
        return {
            "id": self.id,
            "timestamp": self.timestamp,
            "from": self.sender,
            "to": list(self.to),
            "subject": self.subject,
            "text": self.text,
            "html": self.html,
        }


def email_from_sesv2_request(body: bytes) -> CapturedEmail | None:
    """Read a SES v2 SendEmail JSON body (Simple content); None if it is not readable."""
    try:
        request = json.loads(body)
    except ValueError:
        return None
    if not isinstance(request, dict):
        return None
    destination = request.get("Destination") or {}
    simple = (request.get("Content") or {}).get("Simple") or {}
    message_body = simple.get("Body") or {}
    return CapturedEmail(
        sender=str(request.get("FromEmailAddress", "")),
        to=[str(a) for a in destination.get("ToAddresses") or []],
        subject=str((simple.get("Subject") or {}).get("Data", "")),
        text=str((message_body.get("Text") or {}).get("Data", "")),
        html=str((message_body.get("Html") or {}).get("Data", "")),
    )


class Mailbox:
    """Thread-safe, in-memory list of captured emails, oldest first."""

    def __init__(self) -> None:
        self._emails: list[CapturedEmail] = []
        self._lock = threading.Lock()

    def add(self, email: CapturedEmail) -> None:
        """Keep one accepted message."""
        with self._lock:
            self._emails.append(email)

    def list(self) -> list[CapturedEmail]:
        """Every captured message, oldest first."""
        with self._lock:
            return list(self._emails)

    def clear(self) -> None:
        """Forget every captured message."""
        with self._lock:
            self._emails.clear()
