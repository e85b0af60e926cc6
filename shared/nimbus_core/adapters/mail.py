"""Sending email through SES v2 (only the mail function and the operator tool send)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from nimbus_core.adapters.errors import aws_errors
from nimbus_core.mail_templates import Email

if TYPE_CHECKING:
    from types_boto3_sesv2 import SESV2Client


class SesMailer:
    """Sends multipart (text + HTML) email from the deployment's sender."""

    def __init__(self, client: SESV2Client, sender: str) -> None:
        self._client = client
        self._sender = sender

    def send(self, email: Email) -> str:
        """Send ``email``; returns the SES message id."""
        with aws_errors("SendEmail"):
            result = self._client.send_email(
                FromEmailAddress=self._sender,
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
