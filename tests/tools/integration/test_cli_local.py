"""`nimbus` against the running local API (found through its serve.json), including captured mail."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import boto3
import pytest

from nimbus_core.adapters.transactions import DynamoTransactor
from nimbus_core.adapters.users import DynamoUsers
from nimbus_tools.cli.main import main
from nimbus_tools.local.control import clear_mail
from nimbus_tools.local.launcher import LocalApiProcess, start_local_api
from nimbus_tools.local.session import emulator_session
from tests.samples import sample_user

pytestmark = pytest.mark.e2e

FIXTURE = Path(__file__).resolve().parents[2] / "fixtures" / "local_api" / "template.yaml"


@pytest.fixture(scope="module")
def api(tmp_path_factory: pytest.TempPathFactory) -> Iterator[LocalApiProcess]:
    # `.local` like `make serve`, so commands run without --state can find it from a subdirectory.
    state_dir = tmp_path_factory.mktemp("cli-local") / ".local"
    with start_local_api(state_dir=state_dir, template=FIXTURE, workers=1) as running:
        yield running


def _nimbus(api: LocalApiProcess, capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(["--state", str(api.state_dir / "serve.json"), *argv])
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _session() -> boto3.Session:
    return emulator_session("us-east-1")


def _send_mail(api: LocalApiProcess, to: str) -> None:
    request = urllib.request.Request(  # noqa: S310
        f"{api.api_url}/mail", data=json.dumps({"to": to}).encode(), method="POST"
    )
    with urllib.request.urlopen(request, timeout=30) as response:  # noqa: S310
        assert response.status == 202


def test_mail_list_shows_each_message_with_its_text_body_oldest_first(
    api: LocalApiProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    clear_mail(api.aws_endpoint_url)
    _send_mail(api, "first@example.com")
    _send_mail(api, "second@example.com")
    code, out, _ = _nimbus(api, capsys, "mail", "list")
    assert code == 0
    assert out.index("To:      first@example.com") < out.index("To:      second@example.com")
    assert "From:    sender@fixture.example" in out
    assert "Subject: Verify your email" in out
    assert f"Open {api.console_url}/verify?token=tok123" in out


def test_mail_list_filters_by_recipient_and_prints_raw_json(
    api: LocalApiProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    clear_mail(api.aws_endpoint_url)
    _send_mail(api, "carol@example.com")
    _send_mail(api, "dave@example.com")
    code, out, _ = _nimbus(api, capsys, "mail", "list", "--to", "CAROL@example.com", "--json")
    messages = json.loads(out)
    assert code == 0
    assert [m["to"] for m in messages] == [["carol@example.com"]]
    assert set(messages[0]) == {"id", "timestamp", "from", "to", "subject", "text", "html"}
    assert "no mail" in _nimbus(api, capsys, "mail", "list", "--to", "nobody@example.com")[1]


def test_killswitch_and_loglevel_change_the_local_parameters(
    api: LocalApiProcess, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("AWS_PROFILE", "nimbus-no-such-profile")  # ignored for the local emulator
    ssm = _session().client("ssm", endpoint_url=api.aws_endpoint_url)
    assert _nimbus(api, capsys, "killswitch", "enable", "GLOBAL")[0] == 0
    assert ssm.get_parameter(Name="/fixture/fixture/killswitches/GLOBAL")["Parameter"]["Value"] == "on"
    assert ssm.get_parameter(Name="/fixture/fixture/killswitches/FILE_CREATE")["Parameter"]["Value"] == "off"
    assert _nimbus(api, capsys, "killswitch", "disable", "8")[0] == 0
    assert ssm.get_parameter(Name="/fixture/fixture/killswitches/GLOBAL")["Parameter"]["Value"] == "off"
    assert _nimbus(api, capsys, "loglevel", "set", "warn")[0] == 0
    assert _nimbus(api, capsys, "loglevel", "get")[1] == "WARN\n"


def test_staff_promote_and_domains_work_on_the_local_tables(
    api: LocalApiProcess, capsys: pytest.CaptureFixture[str]
) -> None:
    dynamodb = _session().client("dynamodb", endpoint_url=api.aws_endpoint_url)
    users = DynamoUsers(dynamodb, "UsersTable")
    DynamoTransactor(dynamodb).commit(users.create_ops(sample_user("u-5", "erin")))
    assert _nimbus(api, capsys, "staff", "promote", "Erin")[0] == 0
    user = dynamodb.get_item(TableName="UsersTable", Key={"pk": {"S": "USER#u-5"}})["Item"]
    assert user["staff"] == {"BOOL": True}
    [told] = dynamodb.scan(TableName="OutboxTable")["Items"]  # the notice, queued with the change
    assert (told["kind"]["S"], told["userId"]["S"]) == ("notice-staff-granted", "u-5")

    code, out, _ = _nimbus(api, capsys, "domain", "list")
    assert code == 0
    assert "fixture.example" in out


def test_commands_find_serve_json_from_a_subdirectory(
    api: LocalApiProcess, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    subdirectory = api.state_dir.parent / "functions" / "auth"
    subdirectory.mkdir(parents=True)
    monkeypatch.chdir(subdirectory)
    assert main(["killswitch", "list"]) == 0
    assert "ACCOUNT_CREATE" in capsys.readouterr().out
