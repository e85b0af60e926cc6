"""``nimbus``: the operator tool (staff, kill switches, log level, domains, captured and failed mail,
importing an upstream deployment, resealing TOTP secrets), on the running local API (its serve.json)
by default or on a deployed stack with ``--stack NAME [--region R]``."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING

from botocore.exceptions import BotoCoreError, ClientError, NoCredentialsError

from nimbus_tools.cli.target import EXIT_USAGE, CliError, local_target, stack_target

if TYPE_CHECKING:
    from nimbus_tools.cli.commands import TargetFactory


def _target_options() -> argparse.ArgumentParser:
    # SUPPRESS defaults let the options go before or after the command without one placement
    # overwriting the other with None.
    options = argparse.ArgumentParser(add_help=False)
    group = options.add_argument_group("target (default: the local API started by `make serve`)")
    group.add_argument(
        "--state",
        type=Path,
        default=argparse.SUPPRESS,
        metavar="FILE",
        help="the local API's serve.json (default: .local/serve.json)",
    )
    group.add_argument(
        "--stack", default=argparse.SUPPRESS, metavar="NAME", help="a deployed CloudFormation stack"
    )
    group.add_argument("--region", default=argparse.SUPPRESS, help="the deployed stack's region")
    return options


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``nimbus``."""
    common = _target_options()
    parser = argparse.ArgumentParser(prog="nimbus", description="Operate a Nimbus stack.", parents=[common])
    groups = parser.add_subparsers(dest="group", required=True, metavar="COMMAND")

    def group(name: str, help_text: str) -> argparse._SubParsersAction[argparse.ArgumentParser]:
        return groups.add_parser(name, help=help_text).add_subparsers(dest="action", required=True)

    def leaf(
        subparsers: argparse._SubParsersAction[argparse.ArgumentParser], name: str, help_text: str
    ) -> argparse.ArgumentParser:
        return subparsers.add_parser(name, help=help_text, description=help_text, parents=[common])

    staff = group("staff", "give or take staff rights")
    for action, text in (("promote", "make a user staff"), ("demote", "take staff rights away")):
        leaf(staff, action, text).add_argument("username")
    switches = group("killswitch", "turn feature groups off and on")
    leaf(switches, "list", "show every kill switch and whether it is on")
    for action, text in (
        ("enable", "turn a kill switch on (disables the feature)"),
        ("disable", "turn a kill switch off"),
    ):
        leaf(switches, action, text).add_argument("name", help="name or number")
    levels = group("loglevel", "the functions' log level")
    leaf(levels, "get", "show the log level")
    leaf(levels, "set", "change the log level").add_argument("level", help="DEBUG, INFO, WARN, ERROR or NONE")
    domains = group("domain", "domains users can get")
    leaf(domains, "list", "show the offered domains")
    add = leaf(domains, "add", "offer a domain (or change whether it allows subdomains)")
    add.add_argument("name")
    add.add_argument("--subdomains", action="store_true", help="allow subdomains of this domain")
    leaf(domains, "remove", "stop offering a domain").add_argument("name")
    mail = group("mail", "captured mail (local) and failed mail")
    listing = leaf(mail, "list", "show captured mail, newest last")
    listing.add_argument("--to", metavar="ADDRESS", help="only mail to this address")
    listing.add_argument("--json", action="store_true", help="print the raw JSON list")
    failed = leaf(mail, "failed", "show the mail dead-letter queue (without consuming it)")
    failed.add_argument("--json", action="store_true", help="print the raw JSON list")
    retry = leaf(mail, "retry", "re-send failed mail from its outbox item and remove it from the queue")
    retry.add_argument("ids", nargs="*", metavar="ID", help="IDs shown by `nimbus mail failed`")
    retry.add_argument("--all", action="store_true", dest="every", help="every failed message")
    leaf(groups, "status", "dead letters waiting, kill switches on, and the log level")
    ssm = group(
        "ssm-throughput", "SSM Parameter Store higher throughput (the account's, in the stack's region)"
    )
    leaf(ssm, "show", "show whether Parameter Store higher throughput is on")
    leaf(ssm, "enable", "turn Parameter Store higher throughput on (charged per API interaction)")
    _import_options(
        leaf(groups, "import", "import an upstream Cumulonimbus deployment's PostgreSQL database")
    )
    totp = group("totp", "the stored TOTP secrets")
    resealing = leaf(totp, "reseal", "seal every stored TOTP secret under one KMS key (idempotent)")
    resealing.add_argument(
        "--key", metavar="KEY", help="key id, ARN or alias (default: the key the stack's functions seal with)"
    )
    return parser


def _import_options(imports: argparse.ArgumentParser) -> None:
    """The arguments of ``nimbus import``."""
    imports.add_argument(
        "url", metavar="POSTGRES_URL", help="postgresql://user[:password]@host[:port]/dbname"
    )
    imports.add_argument("--dry-run", action="store_true", help="read and check everything, write nothing")
    imports.add_argument("--page-size", type=int, default=500, help="accounts read per page (default 500)")
    imports.add_argument("--workers", type=int, default=8, help="accounts written at once (default 8)")
    imports.add_argument("--json", action="store_true", help="print the report as JSON")


def _target_factory(parser: argparse.ArgumentParser, args: argparse.Namespace) -> TargetFactory:
    state: Path | None = getattr(args, "state", None)
    stack: str | None = getattr(args, "stack", None)
    region: str | None = getattr(args, "region", None)
    if state is not None and stack is not None:
        parser.error("--state and --stack cannot be combined")
    if region is not None and stack is None:
        parser.error("--region needs --stack")
    return partial(stack_target, stack, region) if stack is not None else partial(local_target, state)


def run(args: argparse.Namespace, target: TargetFactory) -> str:
    """Dispatch parsed arguments to their command; returns the text to print."""
    # Each command's module is imported when it runs: `nimbus --help` loads none, and `nimbus staff
    # promote` not what `nimbus import` needs (the importer, PostgreSQL's driver).
    if args.group == "mail":
        return _mail(args, target)
    if args.group == "ssm-throughput":
        from nimbus_tools.cli import throughput

        return throughput.command(args.action, target)
    if args.group == "import":
        from nimbus_tools.cli import importing

        return importing.import_command(args, target)
    if args.group == "totp":
        from nimbus_tools.cli import reseal

        return reseal.command(args, target)
    from nimbus_tools.cli import commands

    commands_by_group: dict[str, Callable[[], str]] = {
        "staff": lambda: commands.staff(args.action, args.username, target),
        "killswitch": lambda: commands.killswitch(args.action, getattr(args, "name", None), target),
        "loglevel": lambda: commands.loglevel(args.action, getattr(args, "level", None), target),
        "domain": lambda: commands.domain(
            args.action, getattr(args, "name", None), getattr(args, "subdomains", False), target
        ),
        "status": lambda: commands.status(target),
    }
    return commands_by_group[args.group]()


def _mail(args: argparse.Namespace, target: TargetFactory) -> str:
    if args.action == "list":
        from nimbus_tools.cli import commands

        return commands.mail(args.to, args.json, target)
    from nimbus_tools.cli import mailqueue

    if args.action == "failed":
        return mailqueue.failed_command(target(), args.json)
    if args.ids and args.every:  # (retry)
        raise CliError("give IDs or --all, not both", EXIT_USAGE)
    return mailqueue.retry_command(target(), args.ids, args.every)


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``nimbus`` console script; returns the exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    target = _target_factory(parser, args)
    try:
        output = run(args, target)
    except CliError as error:
        failure = error
    except NoCredentialsError:
        failure = CliError("no AWS credentials found (configure a profile or AWS_* variables)")
    except ClientError as error:
        details = error.response.get("Error", {})
        failure = CliError(f"AWS error {details.get('Code', '?')}: {details.get('Message', error)}")
    except BotoCoreError as error:
        failure = CliError(str(error))
    else:
        print(output)
        return 0
    print(f"nimbus: {failure}", file=sys.stderr)
    return failure.exit_code


if __name__ == "__main__":
    sys.exit(main())
