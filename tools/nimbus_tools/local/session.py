"""AWS SDK sessions for the local AWS emulator."""

from __future__ import annotations

from typing import TYPE_CHECKING

import botocore.session

if TYPE_CHECKING:
    import boto3


def emulator_botocore_session(region: str | None) -> botocore.session.Session:
    """A botocore session with the emulator's fixed test credentials, whatever AWS_PROFILE says (the
    ``nimbus`` CLI's; ``region`` None leaves the region to botocore's chain, as boto3's does).

    A developer's AWS_PROFILE (possibly one this machine does not have) must neither break the
    local API nor lend its real credentials to calls that only ever go to the emulator.
    """
    core = botocore.session.Session(session_vars={"profile": (None, None, None, None)})
    core.set_credentials("testing", "testing")
    if region is not None:
        core.set_config_variable("region", region)
    return core


def emulator_session(region: str) -> boto3.Session:
    """:func:`emulator_botocore_session` as a boto3 session (for the local API's own use)."""
    # Imported here: boto3's package imports s3transfer, which the CLI (using the botocore session
    # above) would otherwise load on every run for nothing.
    import boto3

    return boto3.Session(botocore_session=emulator_botocore_session(region))
