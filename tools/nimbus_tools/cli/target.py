"""Which stack the CLI operates on: the running local API (serve.json) or a deployed stack.

Its AWS clients are botocore's, the core boto3 wraps (boto3's package would import s3transfer, which
no command uses). The SDK is imported by the first client a command makes, not with this module:
``nimbus --help``, input refused before any AWS call and ``mail list`` on the local API make none.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache, cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, cast

from botocore.exceptions import BotoCoreError, ClientError, NoRegionError

from nimbus_core.adapters.kms import KmsKeys
from nimbus_core.adapters.sealing import Sealer
from nimbus_core.domain.killswitches import KillSwitch, parameter_names
from nimbus_tools.local.state import read_state, state_path

if TYPE_CHECKING:
    import boto3
    import botocore.session
    from botocore.config import Config
    from types_boto3_cloudformation import CloudFormationClient
    from types_boto3_dynamodb import DynamoDBClient
    from types_boto3_dynamodbstreams import DynamoDBStreamsClient
    from types_boto3_kms import KMSClient
    from types_boto3_sesv2 import SESV2Client
    from types_boto3_sqs import SQSClient
    from types_boto3_ssm import SSMClient

    # The CLI's sessions are botocore's; a boto3 Session (tests build targets with one) works too.
    Session = botocore.session.Session | boto3.Session

Service = Literal["dynamodb", "dynamodbstreams", "kms", "sesv2", "sqs", "ssm"]  # what commands use
NOT_RUNNING = "the local API is not running; start it with `make serve`"
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
    session: Session | None  # None: the local emulator's (test credentials), made by the first client
    tables: dict[str, str]
    parameters: dict[str, str]
    endpoint_url: str | None = None  # the local emulator; None for real AWS
    queues: dict[str, str] = field(default_factory=dict)  # logical id -> queue URL
    sender_email: str | None = None  # the address system emails are sent from
    killswitch_path: str | None = None  # the kill switches' parameters are <path>/<NAME>
    stage: str | None = None  # TOTP secrets are sealed under the context {purpose, stage}
    totp_key: str | None = None  # the KMS key (ARN) the functions seal TOTP secrets under
    region: str | None = None  # the local emulator's (its session is made in it)
    # Each client is made once (a command may ask for the same one several times).
    _made: dict[tuple[Service, Config | None], Any] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

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
            return KmsKeys(self.kms())

        return Sealer(keys, key_id=key or "(none)", stage=stage or "")

    @cached_property
    def _session(self) -> Session:
        if self.session is not None:
            return self.session
        # Imported with botocore, by the first client (see the module docstring).
        from nimbus_tools.local.session import emulator_botocore_session

        return emulator_botocore_session(self.region)

    def _client(self, service: Service, config: Config | None = None) -> Any:
        import botocore.session  # by the first client (see the module docstring)

        made = self._made.get((service, config))
        if made is None:
            session = self._session
            if isinstance(session, botocore.session.Session):
                made = session.create_client(service, endpoint_url=self.endpoint_url, config=config)
            else:
                made = session.client(service, endpoint_url=self.endpoint_url, config=config)
            self._made[service, config] = made
        return made

    def dynamodb(self, config: Config | None = None) -> DynamoDBClient:
        """A DynamoDB client for this stack."""
        return cast("DynamoDBClient", self._client("dynamodb", config))

    def ssm(self) -> SSMClient:
        """An SSM client for this stack."""
        return cast("SSMClient", self._client("ssm"))

    def sqs(self) -> SQSClient:
        """An SQS client for this stack."""
        return cast("SQSClient", self._client("sqs"))

    def sesv2(self) -> SESV2Client:
        """An SES v2 client for this stack."""
        return cast("SESV2Client", self._client("sesv2"))

    def kms(self) -> KMSClient:
        """A KMS client for this stack."""
        return cast("KMSClient", self._client("kms"))

    def dynamodbstreams(self) -> DynamoDBStreamsClient:
        """A DynamoDB Streams client for this stack (regional endpoint, as the emulator serves)."""
        return cast("DynamoDBStreamsClient", self._client("dynamodbstreams", _regional()))


@cache  # one Config, so the client made with it is made once
def _regional() -> Config:
    from botocore.config import Config

    return Config(account_id_endpoint_mode="disabled")


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
        session=None,  # the emulator's, made by the first client (`mail list` makes none)
        tables=dict(state["tables"]),
        parameters=dict(state["parameters"]),
        endpoint_url=state["aws_endpoint_url"],
        region=state["region"],
        queues=dict(state.get("queues", {})),
        sender_email=state.get("sender_email") or None,
        killswitch_path=state.get("killswitch_path") or None,
        stage=state.get("stage") or None,
        totp_key=state.get("totp_key") or None,
    )


def stack_target(stack_name: str, region: str | None = None) -> Target:
    """A deployed stack, with names from its CloudFormation Outputs."""
    import botocore.session  # here, not at the top: see the module docstring

    session = botocore.session.Session()  # the profile, credentials and region botocore finds
    if region is not None:
        session.set_config_variable("region", region)
    # A missing profile or an unreadable config file fails here, before the stack is read (its error
    # printed as is), as when this was a boto3 session, which reads them when made.
    session.get_scoped_config()
    try:
        cloudformation = cast("CloudFormationClient", session.create_client("cloudformation"))
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
        description=f"stack {stack_name} ({session.get_config_variable('region')})",
        session=session,
        tables=named("Name", "Table"),
        parameters=named("Name", "Parameter"),
        queues=named("Url", "Queue"),
        sender_email=outputs.get("SenderEmail"),
        killswitch_path=outputs.get("KillSwitchPath"),
        stage=outputs.get("Stage"),
        totp_key=outputs.get("TotpKeyArn"),
    )
