"""``nimbus-local serve``: the local API behind ``make serve`` (no AWS account, no Docker)."""

from __future__ import annotations

import argparse
import errno
import os
import signal
import sys
import threading
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING

# The local API is imported where it is used, not here: every function worker is a spawned process,
# and a spawned process imports its parent's main module (this one) again. Imported at the top, the
# servers and the emulator would load into each worker, as part of every function's cold start.
if TYPE_CHECKING:
    from nimbus_tools.local.stack import StackOptions

# `UPSTREAM_JWT_CERTIFICATE=certs/jwt.crt make serve`: upstream's certificate (a PEM file's path, or
# the PEM itself), given to the functions as the UpstreamJwtCertificate template parameter.
UPSTREAM_CERTIFICATE_VARIABLE = "UPSTREAM_JWT_CERTIFICATE"
_UPSTREAM_CERTIFICATE_PARAMETER = "UpstreamJwtCertificate"


def with_upstream_certificate(params: Mapping[str, str], environ: Mapping[str, str]) -> dict[str, str]:
    """``params`` with the UpstreamJwtCertificate parameter taken from ``UPSTREAM_JWT_CERTIFICATE``
    unless a ``--param`` gives it already. The functions' own environment comes from the template
    alone, so without this the template's empty default would silently win. ValueError when the
    certificate cannot be read, or is not a PEM X.509 certificate of a P-256 (ES256) key: such a
    deployment would refuse every upstream token without a word."""
    merged = dict(params)
    source = f"--param {_UPSTREAM_CERTIFICATE_PARAMETER}"
    if _UPSTREAM_CERTIFICATE_PARAMETER not in merged:
        given = environ.get(UPSTREAM_CERTIFICATE_VARIABLE, "")
        if not given.strip():
            return merged
        source = f"${UPSTREAM_CERTIFICATE_VARIABLE}"
        if not given.lstrip().startswith("-----BEGIN"):
            given = given.strip()
            source = f"{source} ({given})"
            try:
                given = Path(given).expanduser().read_text()
            except (OSError, UnicodeDecodeError) as error:
                raise ValueError(f"{source}: cannot read the certificate: {error}") from None
        merged[_UPSTREAM_CERTIFICATE_PARAMETER] = given
    if merged[_UPSTREAM_CERTIFICATE_PARAMETER]:
        _check_upstream_certificate(merged[_UPSTREAM_CERTIFICATE_PARAMETER], source)
    return merged


def _check_upstream_certificate(pem: str, source: str) -> None:
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509 import load_pem_x509_certificate

    try:
        key = load_pem_x509_certificate(pem.encode()).public_key()
    except ValueError:
        raise ValueError(f"{source}: not a PEM X.509 certificate (upstream's certs/jwt.crt)") from None
    if not isinstance(key, ec.EllipticCurvePublicKey) or not isinstance(key.curve, ec.SECP256R1):
        raise ValueError(f"{source}: not an ES256 (P-256) key's certificate, as upstream's tokens need")


def _pair(text: str) -> tuple[str, str]:
    key, sep, value = text.partition("=")
    if not sep or not key:
        raise argparse.ArgumentTypeError(f"--param expects Key=Value, got {text!r}")
    return key, value


def build_parser() -> argparse.ArgumentParser:
    """The command line of ``nimbus-local``."""
    from nimbus_tools.template import DEFAULT_TEMPLATE_PATH

    parser = argparse.ArgumentParser(prog="nimbus-local", description="Run the Nimbus API locally.")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    serve = commands.add_parser(
        "serve",
        help="serve the API on 127.0.0.1 with an in-process AWS emulator",
        description="Serve the API from template.yaml on 127.0.0.1, backed by an in-process moto server.",
    )
    # `make serve PORT=8080` passes --port; a bare PORT in the environment works too.
    port = os.environ.get("PORT", "")
    for flag, kind, default, text in (
        ("--port", int, int(port) if port.isdigit() else 3000, "API port ($PORT or 3000; 0: any)"),
        ("--moto-port", int, 0, "AWS emulator port (default: any free port)"),
        ("--state-dir", Path, Path(".local"), "serve.json and logs/ (default: .local)"),
        ("--workers", int, 4, "warm worker processes per function (default: 4)"),
        ("--template", Path, DEFAULT_TEMPLATE_PATH, "SAM template to serve"),
    ):
        serve.add_argument(flag, type=kind, default=default, help=text)
    help_text = "override a template parameter (repeatable)"
    serve.add_argument("--param", action="append", type=_pair, metavar="KEY=VALUE", help=help_text)
    serve.add_argument(
        "--test-password-hashing",
        action="store_true",
        help="hash passwords with argon2id's smallest cost, for a test suite (default: production's)",
    )
    serve.add_argument(
        "--config-cache-seconds",
        type=int,
        choices=range(11),
        metavar="0-10",
        help="how long the functions keep the kill switches and log level read from SSM (default: the "
        "deployed functions' own, 10), shorter for a test suite that flips them",
    )
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``nimbus-local`` console script."""
    from nimbus_tools.local.stack import StackOptions
    from nimbus_tools.template import load_template, parameter_values

    parser = build_parser()
    args = parser.parse_args(argv)
    if args.workers < 1:
        parser.error("--workers must be at least 1")
    try:
        params = with_upstream_certificate(dict(args.param or []), os.environ)
        # Bad --param values are usage errors: refuse them before starting anything.
        parameter_values(load_template(args.template), params)
    except (ValueError, OSError) as error:  # TemplateError is a ValueError
        parser.error(str(error))
    options = (args.port, args.moto_port, args.state_dir, params, args.workers, args.template)
    hashing, cache = args.test_password_hashing, args.config_cache_seconds
    return serve(StackOptions(*options, test_password_hashing=hashing, config_cache_seconds=cache))


def serve(options: StackOptions) -> int:
    """Run the local stack until Ctrl-C or SIGTERM; 0 on a clean stop, 1 if it cannot start."""
    from nimbus_tools.local.stack import LocalStack
    from nimbus_tools.local.state import StateDirInUseError
    from nimbus_tools.local.static import console_url
    from nimbus_tools.template import TemplateError

    stop = threading.Event()
    for signum in (signal.SIGINT, signal.SIGTERM):
        signal.signal(signum, lambda *_: stop.set())

    # This process only ever talks to its own emulator, and moto itself builds boto3 sessions, which
    # fail on a profile this machine does not have: a developer's AWS_PROFILE must not matter here.
    for variable in ("AWS_PROFILE", "AWS_DEFAULT_PROFILE"):
        os.environ.pop(variable, None)

    stack = LocalStack(options)
    try:
        state = stack.start()
    except (TemplateError, StateDirInUseError) as error:
        print(f"nimbus-local: {error}", file=sys.stderr)
        return 1
    except OSError as error:
        hint = " (choose another with --port or --moto-port)" if error.errno == errno.EADDRINUSE else ""
        print(f"nimbus-local: cannot start: {error}{hint}", file=sys.stderr)
        return 1

    width = max((len(key) for key, _ in stack.routes()), default=0)
    for route_key, function in stack.routes():
        print(f"  {route_key:<{width}}  -> {function}")
    print(f"Function logs: {options.state_dir / 'logs'}/<Function>.log")
    print(f"Account console: {console_url(int(state['api_url'].rsplit(':', 1)[1]))}/")
    if options.params.get(_UPSTREAM_CERTIFICATE_PARAMETER):
        print("Upstream tokens: accepted (the upstream certificate was given)")
    print(f"Nimbus local API on {state['api_url']} (AWS emulator on {state['aws_endpoint_url']})", flush=True)
    try:
        while not stop.wait(0.5):
            pass
    finally:
        print("Stopping...", flush=True)
        stack.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
