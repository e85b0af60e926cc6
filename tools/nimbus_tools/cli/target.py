"""Which stack the CLI operates on: the running local API (serve.json) or a deployed stack."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError, NoRegionError

from nimbus_core.adapters.kms import KmsKeys
from nimbus_core.adapters.sealing import Sealer
from nimbus_core.domain.killswitches import KillSwitch, parameter_names
from nimbus_tools.local.session import emulator_session
from nimbus_tools.local.state import read_state, state_path

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient
    from types_boto3_dynamodbstreams import DynamoDBStreamsClient
    from types_boto3_sesv2 import SESV2Client
    from types_boto3_sqs import SQSClient
    from types_boto3_ssm import SSMClient

NOT_RUNNING = "the local API is not running; start it with `make serve`"
_REGIONAL = Config(account_id_endpoint_mode="disabled")
# Exit codes: 1 for a failure (unknown user, AWS error, API not running), 2 for bad input, the
# code argparse uses for usage errors.
EXIT_FAILURE = 1
EXIT_USAGE = 2


class CliError(Exception):
    """An expected failure: its message is printed to stderr and the command exits ``exit_code``."""

    def __init__(self, message: str, exit_code: int = EXIT_FAILURE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


@dataclass(frozen=True)
class Target:
    """Resource names and an AWS session for one stack."""

    description: str
    session: boto3.Session
    tables: dict[str, str]
    parameters: dict[str, str]
    endpoint_url: str | None = None  # the local emulator; None for real AWS
    queues: dict[str, str] = field(default_factory=dict)  # logical id -> queue URL
    sender_email: str | None = None  # the address system emails are sent from
    killswitch_path: str | None = None  # the kill switches' parameters are <path>/<NAME>
    stage: str | None = None  # TOTP secrets are sealed under the context {purpose, stage}
    totp_key: str | None = None  # the KMS key (ARN) the functions seal TOTP secrets under

    def table(self, logical_id: str) -> str:
        """The physical name of a table (``"UsersTable"`` -> its name)."""
        return self._named(self.tables, logical_id)

    def parameter(self, logical_id: str) -> str:
        """The name of an SSM parameter (``"LogLevelParameter"`` -> ``/nimbus/dev/loglevel``)."""
        return self._named(self.parameters, logical_id)

    def queue(self, logical_id: str) -> str:
        """The URL of an SQS queue of the stack."""
        return self._named(self.queues, logical_id)

    def _named(self, names: dict[str, str], logical_id: str) -> str:
        if logical_id not in names:
            raise CliError(f"{self.description} has no {logical_id}")
        return names[logical_id]

    def killswitch_parameters(self) -> dict[KillSwitch, str]:
        """Each kill switch's SSM parameter name, as the functions of this stack read them."""
        if not self.killswitch_path:
            raise CliError(f"{self.description} has no kill switch path")
        return parameter_names(self.killswitch_path)

    def sealer(self, key_id: str | None = None) -> Sealer:
        """Seals TOTP secrets as this stack's functions do (under ``key_id``, default the stack's
        key), and opens them under any key the caller's credentials may use."""
        key, stage = key_id or self.totp_key, self.stage

        def keys() -> KmsKeys:  # asked for by the first seal or unseal only
            if not key or not stage:
                raise CliError(f"{self.description} names no TOTP key or stage (deployed before sealing?)")
            return KmsKeys(self.session.client("kms", endpoint_url=self.endpoint_url))

        return Sealer(keys, key_id=key or "(none)", stage=stage or "")

    def dynamodb(self) -> DynamoDBClient:
        """A DynamoDB client for this stack."""
        return self.session.client("dynamodb", endpoint_url=self.endpoint_url)

    def ssm(self) -> SSMClient:
        """An SSM client for this stack."""
        return self.session.client("ssm", endpoint_url=self.endpoint_url)

    def sqs(self) -> SQSClient:
        """An SQS client for this stack."""
        return self.session.client("sqs", endpoint_url=self.endpoint_url)

    def sesv2(self) -> SESV2Client:
        """An SES v2 client for this stack."""
        return self.session.client("sesv2", endpoint_url=self.endpoint_url)

    def dynamodbstreams(self) -> DynamoDBStreamsClient:
        """A DynamoDB Streams client for this stack (regional endpoint, as the emulator serves)."""
        return self.session.client("dynamodbstreams", endpoint_url=self.endpoint_url, config=_REGIONAL)


def local_target(state_file: Path | None = None) -> Target:
    """The running local API, from its serve.json (default: ``.local/serve.json`` in the working
    directory or its nearest parent: `make serve` writes it at the repository root, and `nimbus` may
    run in a subdirectory)."""
    here = Path.cwd().resolve()
    candidates = [directory / state_path() for directory in (here, *here.parents)]
    state = read_state(state_file or next((c for c in candidates if c.exists()), candidates[0]))
    if state is None:
        raise CliError(NOT_RUNNING)
    return Target(
        description=f"the local API ({state['api_url']})",
        session=emulator_session(state["region"]),
        tables=dict(state["tables"]),
        parameters=dict(state["parameters"]),
        endpoint_url=state["aws_endpoint_url"],
        queues=dict(state.get("queues", {})),
        sender_email=state.get("sender_email") or None,
        killswitch_path=state.get("killswitch_path") or None,
        stage=state.get("stage") or None,
        totp_key=state.get("totp_key") or None,
    )


def stack_target(stack_name: str, region: str | None = None) -> Target:
    """A deployed stack, with names from its CloudFormation Outputs."""
    session = boto3.Session(region_name=region)
    try:
        cloudformation = session.client("cloudformation")
        stacks = cloudformation.describe_stacks(StackName=stack_name)["Stacks"]
    except NoRegionError:
        raise CliError("no AWS region configured; pass --region") from None
    except ClientError as error:
        raise CliError(
            f"cannot read stack {stack_name!r}: {error.response['Error'].get('Message', error)}"
        ) from None
    except BotoCoreError as error:
        raise CliError(f"cannot read stack {stack_name!r}: {error}") from None
    outputs = {o["OutputKey"]: o["OutputValue"] for o in stacks[0].get("Outputs", []) if "OutputKey" in o}

    def named(suffix: str, kind: str) -> dict[str, str]:
        # An output "UsersTableName" names the table the CLI (and serve.json) calls "UsersTable".
        return {
            key.removesuffix(suffix): value for key, value in outputs.items() if key.endswith(kind + suffix)
        }

    return Target(
        description=f"stack {stack_name} ({session.region_name})",
        session=session,
        tables=named("Name", "Table"),
        parameters=named("Name", "Parameter"),
        queues=named("Url", "Queue"),
        sender_email=outputs.get("SenderEmail"),
        killswitch_path=outputs.get("KillSwitchPath"),
        stage=outputs.get("Stage"),
        totp_key=outputs.get("TotpKeyArn"),
    )
