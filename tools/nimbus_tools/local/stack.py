"""The running local stack: AWS emulator, provisioned resources, function pools and HTTP server.

:class:`LocalStack` owns the start-up order (the functions' environment depends on the ports that
were actually bound) and a shutdown that releases everything it started.
"""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field
from pathlib import Path

from nimbus_tools.local.aws import AwsEmulator
from nimbus_tools.local.cors import CorsPolicy
from nimbus_tools.local.functions import FunctionPools
from nimbus_tools.local.gateway import Gateway
from nimbus_tools.local.provision import clients_from_session, provision
from nimbus_tools.local.router import Router
from nimbus_tools.local.server import LocalApiServer, RequestLog
from nimbus_tools.local.session import emulator_session
from nimbus_tools.local.state import ServeLock, ServeState, remove_state, state_path, write_state
from nimbus_tools.local.static import StaticSite, console_url
from nimbus_tools.local.streams import StreamPoller
from nimbus_tools.template import (
    DEFAULT_TEMPLATE_PATH,
    LOCAL_REGION,
    FunctionSpec,
    function_specs,
    http_api_cors,
    load_template,
    parameter_values,
    stream_subscriptions,
)

HOST = "127.0.0.1"


@dataclass
class StackOptions:
    """How to run the local stack (the ``serve`` command's options)."""

    port: int = 3000
    moto_port: int = 0
    state_dir: Path = Path(".local")
    params: dict[str, str] = field(default_factory=dict)
    workers: int = 4
    template_path: Path = DEFAULT_TEMPLATE_PATH


class LocalStack:
    """Start with :meth:`start`, stop with :meth:`stop` (idempotent)."""

    def __init__(self, options: StackOptions, request_log: RequestLog | None = None) -> None:
        self.options = options
        self.request_log = request_log or RequestLog()
        self.emulator: AwsEmulator | None = None
        self.server: LocalApiServer | None = None
        self.pools: FunctionPools | None = None
        self.poller: StreamPoller | None = None
        self.specs: list[FunctionSpec] = []
        self.state: ServeState | None = None
        self._thread: threading.Thread | None = None
        self._lock: ServeLock | None = None

    @property
    def state_file(self) -> Path:
        """Where serve.json is written."""
        return state_path(self.options.state_dir)

    def start(self) -> ServeState:
        """Start everything, write serve.json, and return its contents (stops again on failure).

        Raises :class:`StateDirInUseError` before starting anything when another server uses the
        state directory: its serve.json is what the operator tool acts on, and must stay its own.
        """
        try:
            return self._start()
        except BaseException:
            self.stop()
            raise

    def _start(self) -> ServeState:
        options = self.options
        template = load_template(options.template_path)
        parameter_values(template, options.params)  # refuse bad --param values before binding anything
        self._lock = ServeLock.acquire(options.state_dir)  # held until stop(), or the process ends

        self.emulator = AwsEmulator(HOST, options.moto_port)
        aws_url = self.emulator.start()
        self.server = LocalApiServer((HOST, options.port), self.request_log)
        api_url = f"http://{HOST}:{self.server.port}"

        params = dict(options.params)
        declared = template.get("Parameters") or {}
        if "VerificationUrl" in declared:
            # Verification links open the account console on this server, on whatever port it got,
            # at localhost: the console's one origin (passkeys work there, never on an IP address).
            params.setdefault("VerificationUrl", f"{console_url(self.server.port)}/verify?token={{token}}")
        if "RecoveryUrl" in declared:
            params.setdefault("RecoveryUrl", f"{console_url(self.server.port)}/recover?token={{token}}")
        if "WebAuthnRpId" in declared and "WebAuthnRpId" not in params:
            # Security keys work on pages of this server: browsers accept "localhost" as a relying
            # party over plain http, never an IP address, so the local origin is localhost:<port>.
            params["WebAuthnRpId"] = "localhost"
            params.setdefault("WebAuthnOrigins", f"http://localhost:{self.server.port}")
        values = parameter_values(template, params)

        clients = clients_from_session(emulator_session(LOCAL_REGION), endpoint_url=aws_url)
        provisioned = provision(clients, template, params)

        self.specs = function_specs(template, params)
        self.pools = FunctionPools(
            self.specs,
            template_dir=options.template_path.resolve().parent,
            aws_endpoint_url=aws_url,
            log_dir=options.state_dir / "logs",
            workers=options.workers,
            region=LOCAL_REGION,
        )
        cors_config = http_api_cors(template, params)
        self.server.gateway = Gateway(
            Router.from_specs(self.specs),
            self.pools,
            CorsPolicy.from_config(cors_config) if cors_config else None,
            static=StaticSite(options.template_path.resolve().parent),
        )
        # Functions fed by a table's stream (MailFunction by the outbox) run as Lambda would run them.
        self.poller = StreamPoller(
            stream_subscriptions(template),
            self.pools,
            session=emulator_session(LOCAL_REGION),
            endpoint_url=aws_url,
            tables=provisioned.tables,
            queues=provisioned.queues,
            log=lambda line: print(line, flush=True),
        )
        self.poller.start()
        self._thread = threading.Thread(target=self.server.serve_forever, name="local-api", daemon=True)
        self._thread.start()

        self.state = {
            "api_url": api_url,
            "aws_endpoint_url": aws_url,
            "region": LOCAL_REGION,
            "stage": values.get("Stage", ""),
            "tables": provisioned.tables,
            "parameters": provisioned.parameters,
            "queues": provisioned.queues,
            "sender_email": values.get("SenderEmail", ""),
            # The path the functions themselves read, so `nimbus killswitch` and the API agree.
            "killswitch_path": next(
                (s.environment["KILLSWITCH_PATH"] for s in self.specs if "KILLSWITCH_PATH" in s.environment),
                "",
            ),
            "pid": os.getpid(),
        }
        write_state(self.state_file, self.state)
        return self.state

    def routes(self) -> list[tuple[str, str]]:
        """(route key, function) for every route, for the start-up banner."""
        pairs = [(route.route_key, spec.logical_id) for spec in self.specs for route in spec.routes]
        return sorted(pairs, key=lambda pair: (pair[0] == "$default", pair[0].split(" ")[-1], pair[0]))

    def stop(self) -> None:
        """Stop serving, stop the workers and the emulator, delete serve.json."""
        if self.server is not None:
            if self._thread is not None:
                self.server.shutdown()
                self._thread.join(timeout=5)
            self.server.server_close()
            self.server = None
        if self.poller is not None:
            self.poller.request_stop()
        if self.pools is not None:
            self.pools.close()
            self.pools = None
        if self.poller is not None:
            self.poller.stop()
            self.poller = None
        if self.emulator is not None:
            self.emulator.stop()
            self.emulator = None
        if self.state is not None:
            remove_state(self.state_file, self.state["pid"])
            self.state = None
        if self._lock is not None:
            self._lock.release()
            self._lock = None

    def __enter__(self) -> LocalStack:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()


def parse_params(pairs: list[str] | None) -> dict[str, str]:
    """``["Key=Value", ...]`` -> dict; raises ValueError on an item without ``=``."""
    params: dict[str, str] = {}
    for pair in pairs or []:
        key, sep, value = pair.partition("=")
        if not sep or not key:
            raise ValueError(f"--param expects Key=Value, got {pair!r}")
        params[key] = value
    return params
