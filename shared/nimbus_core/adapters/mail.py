"""Sending email through SES v2."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nimbus_core.domain.models import Email

if TYPE_CHECKING:
    from types_boto3_sesv2 import SESV2Client


class SesMailer:
    """Sends multipart (text + HTML) emails from one sender address through ``client``."""

    def __init__(self, client: SESV2Client, sender: str) -> None:
        self.client = client
        self.sender = sender

    def send(self, email: Email) -> str:
        """Send ``email``; returns the SES message id. SES errors propagate (the caller retries)."""
        result = self.client.send_email(
            FromEmailAddress=self.sender,
            Destination={"ToAddresses": [email.to]},
            Content={
                "Simple": {
                    "Subject": {"Data": email.subject, "Charset": "UTF-8"},
                    "Body": {
                        "Text": {"Data": email.text, "Charset": "UTF-8"},
                        "Html": {"Data": email.html, "Charset": "UTF-8"},
                    },
                }
            },
        )
        return result["MessageId"]
