"""Sending email through SES v2."""

from __future__ import annotations

from nimbus_core.adapters.clients import sesv2
from nimbus_core.mail_templates import Email
from nimbus_core.settings import get_settings


def send(email: Email) -> str:
    """Send a multipart (text + HTML) email from the deployment's sender; returns the SES message id."""
    result = sesv2().send_email(
        FromEmailAddress=get_settings().sender_email,
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
