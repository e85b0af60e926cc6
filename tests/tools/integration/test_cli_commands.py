"""`nimbus` against a deployed stack (CloudFormation outputs), emulated by moto's mock_aws."""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import boto3
import pytest

from nimbus_core.adapters.outbox import OutboxMessage, message_from_image
from nimbus_core.adapters.transactions import DynamoTransactor
from nimbus_core.adapters.users import DynamoUsers
from nimbus_core.domain.killswitches import KillSwitch
from nimbus_tools.cli.main import main
from nimbus_tools.template import load_template, resolver, resources_of_type
from tests.integration.conftest import fresh_aws
from tests.migration.upstream import Upstream
from tests.samples import sample_user

pytestmark = pytest.mark.waits  # the operator tool run as a process

REGION = "eu-west-1"
STACK = ["--stack", "nimbus-test", "--region", REGION]
ISO_MS = re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d\.\d{3}Z")


def _stack_template() -> str:
    """The real template's tables, parameters and name outputs, as plain CloudFormation."""
    template = load_template()
    # The tables as deployed with the default parameters (moto's CloudFormation leaves an index
    # that an Fn::If drops in the list, as None).
    names = resolver(template)
    tables = {
        logical_id: {**resource, "Properties": names.resolve(resource["Properties"])}
        for logical_id, resource in resources_of_type(template, "AWS::DynamoDB::Table").items()
    }
    resources = {
        **tables,
        **resources_of_type(template, "AWS::SSM::Parameter"),
        **resources_of_type(template, "AWS::SQS::Queue"),
    }
    outputs = {
        key: value
        for key, value in template["Outputs"].items()
        if key.endswith(("Name", "DeadLetterQueueUrl", "Path"))
    }
    body = {
        "Parameters": template["Parameters"],
        "Resources": resources,
        "Outputs": outputs,
    }
    return json.dumps(body)


class Deployed:
    """The emulated stack: names from its outputs, clients in its region."""

    def __init__(self) -> None:
        cloudformation = boto3.client("cloudformation", region_name=REGION)
        cloudformation.create_stack(StackName="nimbus-test", TemplateBody=_stack_template())
        stack = cloudformation.describe_stacks(StackName="nimbus-test")["Stacks"][0]
        self.outputs = {o["OutputKey"]: o["OutputValue"] for o in stack["Outputs"]}
        self.dynamodb = boto3.client("dynamodb", region_name=REGION)
        self.ssm = boto3.client("ssm", region_name=REGION)

    def add_user(self, username: str, user_id: str, *, staff: bool = False) -> None:
        """A user written by the functions' own adapter (no copy of the schema here)."""
        users = DynamoUsers(self.dynamodb, self.outputs["UsersTableName"])
        DynamoTransactor(self.dynamodb).commit(users.create_ops(sample_user(user_id, username, staff=staff)))

    def user(self, user_id: str) -> dict[str, Any]:
        key = {"pk": {"S": f"USER#{user_id}"}}
        return self.dynamodb.get_item(TableName=self.outputs["UsersTableName"], Key=key)["Item"]

    def outbox(self) -> list[OutboxMessage]:
        """The queued mail, oldest first, read the way the mail function reads it."""
        items = self.dynamodb.scan(TableName=self.outputs["OutboxTableName"])["Items"]
        return sorted((message_from_image(item) for item in items), key=lambda m: m.id)

    def parameter(self, output: str) -> str:
        return self.ssm.get_parameter(Name=self.outputs[output])["Parameter"]["Value"]

    def switches_on(self) -> set[str]:
        """The kill switches stored as on, read from each switch's own parameter."""
        path = self.outputs["KillSwitchPath"]
        return {
            s.name
            for s in KillSwitch
            if self.ssm.get_parameter(Name=f"{path}/{s.name}")["Parameter"]["Value"] == "on"
        }

    def domains(self) -> dict[str, dict[str, Any]]:
        items = self.dynamodb.scan(TableName=self.outputs["DomainsTableName"])["Items"]
        return {item["id"]["S"]: item for item in items}


@pytest.fixture
def deployed(monkeypatch: pytest.MonkeyPatch) -> Iterator[Deployed]:
    for key, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"}.items():
        monkeypatch.setenv(key, value)
    for key in ("AWS_ENDPOINT_URL", "AWS_PROFILE", "AWS_DEFAULT_REGION", "AWS_REGION"):
        monkeypatch.delenv(key, raising=False)
    with fresh_aws():
        yield Deployed()


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    captured = capsys.readouterr()
    return code, captured.out, captured.err


# ----------------------------------------------------------------------------------------------- staff


def test_promote_sets_staff_on_the_user_found_by_case_insensitive_username(
    deployed: Deployed, capsys: pytest.CaptureFixture[str]
) -> None:
    deployed.add_user("Alice", "u-1")
    code, out, _ = _run(capsys, *STACK, "staff", "promote", "ALICE")
    assert code == 0
    assert "ALICE is now staff" in out
    assert "has no second factor yet" in out  # staff endpoints will refuse them until they enrol one
    user = deployed.user("u-1")
    assert user["staff"] == {"BOOL": True}
    assert ISO_MS.fullmatch(user["updatedAt"]["S"])


def test_demote_clears_staff_and_target_options_may_follow_the_command(
    deployed: Deployed, capsys: pytest.CaptureFixture[str]
) -> None:
    deployed.add_user("bob", "u-2", staff=True)
    code, out, _ = _run(capsys, "staff", "demote", "bob", *STACK)
    assert code == 0
    assert "no longer staff" in out
    assert deployed.user("u-2")["staff"] == {"BOOL": False}


def test_promote_and_demote_tell_the_user_as_the_api_does_naming_the_operator_tool(
    deployed: Deployed, capsys: pytest.CaptureFixture[str]
) -> None:
    deployed.add_user("Carol", "u-3")

    assert _run(capsys, *STACK, "staff", "promote", "carol")[0] == 0
    assert _run(capsys, *STACK, "staff", "promote", "carol")[0] == 0  # no change, no notice
    assert _run(capsys, *STACK, "staff", "demote", "carol")[0] == 0

    told = deployed.outbox()
    assert [(m.kind, m.user_id, m.email.to) for m in told] == [
        ("notice-staff-granted", "u-3", "carol@example.com"),
        ("notice-staff-removed", "u-3", "carol@example.com"),
    ]
    assert [m.email.subject for m in told] == ["You are now staff", "You are no longer staff"]
    for message in told:
        assert "Carol" in message.email.text
        assert "By: an operator of this service, with its operator tool." in message.email.text
        assert "If you did not expect this, contact us" in message.email.text
        assert "http" not in message.email.text  # a notice holds no link


def test_promoting_an_unknown_user_fails_with_a_message(
    deployed: Deployed, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = _run(capsys, *STACK, "staff", "promote", "nobody")
    assert code == 1
    assert out == ""
    assert "no user named 'nobody'" in err
    assert "Traceback" not in err


def test_a_username_claim_without_its_user_item_is_not_created(
    deployed: Deployed, capsys: pytest.CaptureFixture[str]
) -> None:
    deployed.dynamodb.put_item(
        TableName=deployed.outputs["UsersTableName"],
        Item={"pk": {"S": "USERNAME#ghost"}, "userId": {"S": "u-9"}},
    )
    code, _, err = _run(capsys, *STACK, "staff", "promote", "ghost")
    assert code == 1
    assert "no user named" in err
    key = {"pk": {"S": "USER#u-9"}}
    assert "Item" not in deployed.dynamodb.get_item(TableName=deployed.outputs["UsersTableName"], Key=key)


# --------------------------------------------------------------------------------------- kill switches


def test_killswitch_list_shows_every_switch_with_number_and_state(
    deployed: Deployed, capsys: pytest.CaptureFixture[str]
) -> None:
    deployed.ssm.put_parameter(
        Name=f"{deployed.outputs['KillSwitchPath']}/ACCOUNT_LOGIN", Value="on", Type="String", Overwrite=True
    )
    code, out, _ = _run(capsys, *STACK, "killswitch", "list")
    assert code == 0
    rows = [line.split() for line in out.splitlines()]
    assert rows[0] == ["NAME", "NUMBER", "STATE"]
    assert ["ACCOUNT_LOGIN", "4", "on"] in rows
    assert ["GLOBAL", "8", "off"] in rows
    assert len(rows) == 1 + 9


def test_killswitch_enable_and_disable_by_name_or_number(
    deployed: Deployed, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(capsys, *STACK, "killswitch", "enable", "account_login")[0] == 0
    assert _run(capsys, *STACK, "killswitch", "enable", "0")[0] == 0
    assert deployed.switches_on() == {"ACCOUNT_CREATE", "ACCOUNT_LOGIN"}
    code, out, _ = _run(capsys, *STACK, "killswitch", "enable", "ACCOUNT_CREATE")
    assert code == 0
    assert "was already on" in out
    assert _run(capsys, *STACK, "killswitch", "disable", "Account_Create")[0] == 0
    assert deployed.switches_on() == {"ACCOUNT_LOGIN"}


def test_unknown_killswitch_exits_2_listing_the_valid_ones(capsys: pytest.CaptureFixture[str]) -> None:
    # Bad input is refused before any AWS call: no stack (or running API) needed.
    code, _, err = _run(capsys, "killswitch", "enable", "everything")
    assert code == 2
    assert "unknown kill switch 'everything'" in err
    assert "ACCOUNT_LOGIN (4)" in err
    assert "GLOBAL (8)" in err
    assert _run(capsys, "killswitch", "disable", "9")[0] == 2


@pytest.mark.parametrize(
    "number", ["08", "04", "+4", "4.0", "\u0664", "\uff14", "4_0", "-0", "0x4", "0" * 40 + "8"]
)
def test_a_killswitch_number_is_only_its_canonical_decimal(
    number: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # int() reads every one of these as a switch's number; the operator meant something else.
    code, _, err = _run(capsys, "killswitch", "enable", number)
    assert code == 2
    assert "unknown kill switch" in err


# ------------------------------------------------------------------------------------------- log level


def test_loglevel_get_and_set_normalise_the_level(
    deployed: Deployed, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(capsys, *STACK, "loglevel", "get") == (0, "INFO\n", "")
    code, out, _ = _run(capsys, *STACK, "loglevel", "set", " debug ")
    assert code == 0
    assert "DEBUG" in out
    assert "was INFO" in out
    assert deployed.parameter("LogLevelParameterName") == "DEBUG"


@pytest.mark.parametrize("level", ["verbose", "10", ""])
def test_invalid_loglevel_exits_2(level: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "loglevel", "set", level)
    assert code == 2
    assert "DEBUG, INFO, WARN, ERROR, NONE" in err


# --------------------------------------------------------------------------------------------- domains


def test_domain_add_stores_the_lower_cased_name_and_add_again_updates_subdomains(
    deployed: Deployed, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(capsys, *STACK, "domain", "add", "Files.Example.")
    assert code == 0
    assert "added files.example" in out
    first = deployed.domains()["files.example"]
    assert first["subdomains"] == {"BOOL": False}
    assert ISO_MS.fullmatch(first["createdAt"]["S"])

    code, out, _ = _run(capsys, *STACK, "domain", "add", "files.example", "--subdomains")
    assert code == 0
    assert "updated files.example" in out
    second = deployed.domains()["files.example"]
    assert second["subdomains"] == {"BOOL": True}
    assert second["createdAt"] == first["createdAt"]


def test_domain_list_shows_each_domain_and_remove_deletes_it(
    deployed: Deployed, capsys: pytest.CaptureFixture[str]
) -> None:
    assert "no domains" in _run(capsys, *STACK, "domain", "list")[1]
    _run(capsys, *STACK, "domain", "add", "b.example", "--subdomains")
    _run(capsys, *STACK, "domain", "add", "a.example")
    code, out, _ = _run(capsys, *STACK, "domain", "list")
    rows = [line.split() for line in out.splitlines()]
    assert code == 0
    assert rows[0] == ["DOMAIN", "SUBDOMAINS", "CREATED"]
    assert [row[:2] for row in rows[1:]] == [["a.example", "no"], ["b.example", "yes"]]

    assert _run(capsys, *STACK, "domain", "remove", "A.Example")[0] == 0
    assert set(deployed.domains()) == {"b.example"}


def test_removing_an_unknown_domain_exits_1(deployed: Deployed, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, *STACK, "domain", "remove", "nope.example")
    assert code == 1
    assert "nope.example is not an offered domain" in err


@pytest.mark.parametrize(
    "name", ["bad_domain.example", "-x.example", "a..example", "1.2.3.4", "x" * 64 + ".example"]
)
def test_invalid_domain_names_exit_2(name: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, "domain", "add", "--", name)
    assert code == 2
    assert "not a valid domain name" in err


# --------------------------------------------------------------------------------------------- targets


def test_mail_is_refused_for_a_deployed_stack(deployed: Deployed, capsys: pytest.CaptureFixture[str]) -> None:
    code, _, err = _run(capsys, *STACK, "mail", "list")
    assert code == 2
    assert "only captured by the local API" in err


def test_an_unknown_stack_fails_with_a_message(
    deployed: Deployed, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(capsys, "--stack", "missing", "--region", REGION, "loglevel", "get")
    assert code == 1
    assert "cannot read stack 'missing'" in err
    assert "Traceback" not in err


def test_without_a_running_local_api_commands_say_how_to_start_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(capsys, "--state", str(tmp_path / "serve.json"), "loglevel", "get")
    assert code == 1
    assert "the local API is not running; start it with `make serve`" in err


def test_a_serve_json_left_by_a_dead_server_counts_as_not_running(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    state = {
        "api_url": "http://127.0.0.1:1",
        "aws_endpoint_url": "http://127.0.0.1:2",
        "region": "us-east-1",
        "stage": "dev",
        "tables": {},
        "parameters": {},
        "pid": 2**22 + 12345,
    }
    (tmp_path / "serve.json").write_text(json.dumps(state))
    code, _, err = _run(capsys, "--state", str(tmp_path / "serve.json"), "domain", "list")
    assert code == 1
    assert "not running" in err


@pytest.mark.parametrize(
    "argv",
    [
        [],
        ["staff"],
        ["staff", "promote"],
        ["killswitch", "toggle", "x"],
        ["--state", "a", "--stack", "b", "loglevel", "get"],
        ["--region", "eu-west-1", "loglevel", "get"],
    ],
)
def test_usage_errors_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_info:
        main(argv)
    assert exit_info.value.code == 2
    assert "usage:" in capsys.readouterr().err


# ---------------------------------------------------------------------------------------------- import


def test_import_reads_an_upstream_database_and_reports_what_it_did_then_nothing_the_second_time(
    deployed: Deployed, capsys: pytest.CaptureFixture[str], upstream: Upstream
) -> None:
    upstream.add_domain("files.example", subdomains=False)
    upstream.add_user("alice")
    upstream.add_user("ALICE")  # collides with alice under Nimbus's rules: both are listed

    code, out, err = _run(capsys, *STACK, "import", upstream.url, "--dry-run", "--workers", "1")
    assert (code, err.count("Traceback")) == (0, 0)
    assert "would import       0" in out
    assert "(dry run: nothing was written)" in out
    assert deployed.domains() == {}

    upstream.add_user("bob")
    # One writer: moto in process is not safe for concurrent transactions (DynamoDB is).
    code, out, _ = _run(capsys, *STACK, "import", upstream.url, "--json", "--workers", "1")
    report = json.loads(out)
    assert code == 0
    assert (report["imported"]["users"], report["imported"]["domains"], len(report["skipped"])) == (1, 1, 2)
    assert all("collides" in s["reason"] for s in report["skipped"])
    assert deployed.domains()["files.example"]["subdomains"] == {"BOOL": False}

    code, out, _ = _run(capsys, *STACK, "import", upstream.url, "--json", "--workers", "1")
    assert (json.loads(out)["imported"].get("users", 0), json.loads(out)["unchanged"]["users"]) == (0, 1)


def test_import_refuses_a_url_that_is_not_postgresql_and_an_unreachable_database(
    deployed: Deployed, capsys: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _run(capsys, *STACK, "import", "mysql://x/y")
    assert (code, "postgresql://" in err) == (2, True)
    code, _, err = _run(capsys, *STACK, "import", "postgresql://nobody@127.0.0.1:1/none")
    assert (code, "cannot read the upstream database" in err, "Traceback" in err) == (1, True, False)


@pytest.mark.parametrize(
    "url", ["postgresql://reader:Hunter2 pw@127.0.0.1:1/db", "postgresql://reader:%zzpass@h/db"]
)
def test_import_never_repeats_a_password_from_a_url_it_cannot_use(
    deployed: Deployed, capsys: pytest.CaptureFixture[str], url: str
) -> None:
    code, _, err = _run(capsys, *STACK, "import", url)
    assert code == 1
    assert "cannot read the upstream database" in err
    assert "Hunter2" not in err
    assert "zzpass" not in err


# ---------------------------------------------------------------------------------------------- status


def test_status_shows_dead_letters_waiting_the_switches_on_and_the_log_level(
    deployed: Deployed, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, _ = _run(capsys, *STACK, "status")
    assert code == 0
    assert "  MailDeadLetterQueue: 0 message(s) waiting" in out
    assert "  SweepDeadLetterQueue: 0 message(s) waiting" in out
    assert "  RecoveryDeadLetterQueue: 0 message(s) waiting" in out
    assert "  kill switches on: none" in out
    assert "log level: INFO" in out

    sqs = boto3.client("sqs", region_name=REGION)
    sqs.send_message(QueueUrl=deployed.outputs["MailDeadLetterQueueUrl"], MessageBody="{}")
    assert _run(capsys, *STACK, "killswitch", "enable", "ACCOUNT_LOGIN")[0] == 0
    code, out, _ = _run(capsys, *STACK, "status")

    assert "! MailDeadLetterQueue: 1 message(s) waiting  (nimbus mail failed)" in out
    assert "! kill switches on: ACCOUNT_LOGIN (4)" in out
