"""The running local stack: AWS emulator, provisioned resources, function pools and HTTP server,
started in order (the functions' environment depends on the ports actually bound) and all
released by :meth:`LocalStack.stop`."""

from __future__ import annotations

import os
import threading
from dataclasses import dataclass, field, replace
from pathlib import Path

from nimbus_tools.local.aws import AwsEmulator
from nimbus_tools.local.functions import FunctionPools
from nimbus_tools.local.gateway import CorsPolicy, Gateway, http_api_cors
from nimbus_tools.local.provision import ProvisionedStack, provision
from nimbus_tools.local.router import Router
from nimbus_tools.local.server import LocalApiServer, RequestLog
from nimbus_tools.local.session import emulator_session
from nimbus_tools.local.state import ServeLock, ServeState, remove_state, state_path, write_state
from nimbus_tools.local.static import StaticSite, console_url
from nimbus_tools.local.streams import StreamPoller
from nimbus_tools.stream_events import stream_subscriptions
from nimbus_tools.template import (
    DEFAULT_TEMPLATE_PATH,
    LOCAL_REGION,
    FunctionSpec,
    Template,
    function_specs,
    load_template,
    parameter_values,
)

HOST = "127.0.0.1"
# How long an idle stream poller waits for a table write before reading its stream anyway.
IDLE_STREAM_SECONDS = 2.0


@dataclass
class StackOptions:
    """How to run the local stack (the ``serve`` command's options)."""

    port: int = 3000
    moto_port: int = 0
    state_dir: Path = Path(".local")
    params: dict[str, str] = field(default_factory=dict)
    workers: int = 4
    template_path: Path = DEFAULT_TEMPLATE_PATH
    test_password_hashing: bool = False  # argon2id's test profile in every function (test suites)
    # The functions' CONFIG_CACHE_SECONDS (how long they keep SSM's switches): None, their own.
    config_cache_seconds: int | None = None


def local_parameters(template: Template, params: dict[str, str], port: int) -> dict[str, str]:
    """``params`` with what points at this server on ``port`` unless given: the verification and
    recovery links and the sessions page of new sign-in notices open the console, and the WebAuthn
    relying party is ``localhost`` (browsers accept it over plain http, never an IP address), the
    console's one origin."""
    declared, params = template.get("Parameters") or {}, dict(params)
    for name, page in (("VerificationUrl", "verify"), ("RecoveryUrl", "recover")):
        if name in declared:
            params.setdefault(name, f"{console_url(port)}/{page}?token={{token}}")
    if "SessionsUrl" in declared:
        params.setdefault("SessionsUrl", f"{console_url(port)}/sessions")
    if "WebAuthnRpId" in declared and "WebAuthnRpId" not in params:
        params["WebAuthnRpId"] = "localhost"
        params.setdefault("WebAuthnOrigins", f"http://localhost:{port}")
    return params


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
        params = local_parameters(template, options.params, self.server.port)
        provisioned = provision(emulator_session(LOCAL_REGION), template, params, endpoint_url=aws_url)
        self.specs = function_specs(template, params)
        if (cache := options.config_cache_seconds) is not None:
            self.specs = [
                replace(s, environment=s.environment | {"CONFIG_CACHE_SECONDS": str(cache)})
                for s in self.specs
            ]
        root = options.template_path.resolve().parent
        self.pools = FunctionPools(
            self.specs,
            template_dir=root,
            aws_endpoint_url=aws_url,
            log_dir=options.state_dir / "logs",
            workers=options.workers,
            test_password_hashing=options.test_password_hashing,
        )
        cors = http_api_cors(template, params)
        self.server.gateway = Gateway(
            Router.from_specs(self.specs),
            self.pools,
            CorsPolicy.from_config(cors) if cors else None,
            static=StaticSite(root),
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
            # Read as soon as a table is written; an idle stream is still read every few seconds,
            # should a write reach moto in a way the emulator does not see.
            writes=self.emulator.writes,
            interval=IDLE_STREAM_SECONDS,
        )
        self.poller.start()
        self._thread = threading.Thread(target=self.server.serve_forever, name="local-api", daemon=True)
        self._thread.start()
        api_url = f"http://{HOST}:{self.server.port}"
        self.state = self._serve_state(parameter_values(template, params), api_url, aws_url, provisioned)
        write_state(state_path(options.state_dir), self.state)
        return self.state

    def _serve_state(
        self, values: dict[str, str], api_url: str, aws_url: str, provisioned: ProvisionedStack
    ) -> ServeState:
        # The path the functions themselves read, so `nimbus killswitch` and the API agree.
        paths = (s.environment["KILLSWITCH_PATH"] for s in self.specs if "KILLSWITCH_PATH" in s.environment)
        keys = (s.environment["TOTP_KEY_ARN"] for s in self.specs if "TOTP_KEY_ARN" in s.environment)
        return {
            "api_url": api_url,
            "aws_endpoint_url": aws_url,
            "region": LOCAL_REGION,
            "stage": values.get("Stage", ""),
            "tables": provisioned.tables,
            "parameters": provisioned.parameters,
            "queues": provisioned.queues,
            "sender_email": values.get("SenderEmail", ""),
            "killswitch_path": next(paths, ""),
            "totp_key": next(keys, ""),
            "pid": os.getpid(),
        }

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
        if self.poller is not None:
            self.poller.request_stop()
        if self.pools is not None:
            self.pools.close()
        if self.poller is not None:
            self.poller.stop()
        if self.emulator is not None:
            self.emulator.stop()
        if self.state is not None:
            remove_state(state_path(self.options.state_dir), self.state["pid"])
        if self._lock is not None:
            self._lock.release()
        self.server = self.pools = self.poller = self.emulator = self.state = self._lock = None
