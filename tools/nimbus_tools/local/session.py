"""boto3 sessions for the local AWS emulator."""

from __future__ import annotations

import boto3
import botocore.session

from nimbus_tools.template import LOCAL_REGION


def emulator_session(region: str = LOCAL_REGION) -> boto3.Session:
    """A session with the emulator's fixed test credentials, whatever AWS_PROFILE says.

    A developer's AWS_PROFILE (possibly one this machine does not have) must neither break the
    local API nor lend its real credentials to calls that only ever go to the emulator.
    """
    core = botocore.session.Session(session_vars={"profile": (None, None, None, None)})
    return boto3.Session(
        aws_access_key_id="testing",
        aws_secret_access_key="testing",
        region_name=region,
        botocore_session=core,
    )
