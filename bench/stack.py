"""The stack the moto benchmarks run on, in this process: moto's ``mock_aws`` provisioned from
template.yaml, the functions behind ``InProcessApi``, the AWS calls counted (``before-call`` once per
API call, ``before-send`` once per HTTP attempt, of every client), and the uncounted setup of users,
sessions and factors that the requests measured start from (bench/harness.py).
"""

from __future__ import annotations

import io
import logging
import os
import sys
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Sequence
from contextlib import contextmanager, redirect_stdout
from dataclasses import dataclass, field
from typing import Any, cast
from unittest.mock import patch

import boto3
from botocore.handlers import BUILTIN_HANDLERS, REGISTER_FIRST
from moto import mock_aws

from bench.runs import REGION, aws_environment
from nimbus_core.adapters import container
from nimbus_core.adapters.runtime_config import SsmRuntimeConfig
from nimbus_core.platform.settings import get_settings
from nimbus_tools.local.inprocess import InProcessApi, Reply
from nimbus_tools.local.provision import provision
from nimbus_tools.moto_internals import stop_stream_records
from nimbus_tools.template import Template


class ScenarioError(RuntimeError):
    """A request did not behave as scripted, so its numbers would mean nothing."""


@dataclass
class Tally:
    """The AWS activity of one request."""

    calls: list[tuple[str, str]] = field(default_factory=list)  # (service, operation), in call order
    attempts: Counter[str] = field(default_factory=Counter)  # HTTP attempts per service

    def operations(self, service: str = "dynamodb") -> list[str]:
        """The operations called on ``service``, in order."""
        return [op for s, op in self.calls if s == service]


_MEASURING: list[Tally] = []  # the tally of the measurement under way, if any


def _on_call(event_name: str, **_: Any) -> None:
    if _MEASURING:
        _prefix, service, operation = event_name.split(".", 2)
        _MEASURING[-1].calls.append((service, operation))


def _on_send(event_name: str, **_: Any) -> None:
    if _MEASURING:
        _MEASURING[-1].attempts[event_name.split(".")[1]] += 1


# A public extension point of botocore: every client created from now on (the functions' three
# cached ones included) counts its calls, first in line: moto answers in before-send, and the
# first handler that answers ends the event.
BUILTIN_HANDLERS.extend(
    [("before-call", _on_call, REGISTER_FIRST), ("before-send", _on_send, REGISTER_FIRST)]
)


@contextmanager
def measure() -> Iterator[Tally]:
    """Count the API calls and HTTP attempts of every client inside the block."""
    tally = Tally()
    _MEASURING.append(tally)
    try:
        yield tally
    finally:
        _MEASURING.remove(tally)


def timed[T](call: Callable[[], T]) -> tuple[float, Tally, T]:
    """Milliseconds of ``call``, its AWS calls, and its result."""
    with measure() as tally:
        started = time.perf_counter()
        result = call()
        elapsed = (time.perf_counter() - started) * 1000
    return elapsed, tally, result


@contextmanager
def moto_stack(
    template: Template, handlers: Sequence[str] | None = None, streams: Collection[str] | None = None
) -> Iterator[InProcessApi]:
    """moto provisioned from ``template``, the in-process API with ``handlers`` imported (all by
    default), as in a warm container, and the functions' log lines captured (a ScenarioError gets
    the last ones), for the block. ``streams``: the settings naming the tables whose streams keep
    recording (None: all of them); see ``stop_stream_records`` for why.

    moto's data starts empty and is emptied after, and the environment is put back: inside another
    mock (a test worker's stack; nested mocks share moto's data) nothing the bench made, its tables
    with their streams turned off among them, is left for the outer stack to mistake for its own."""
    with aws_environment(), patch.dict(os.environ), mock_aws() as mocked:
        mocked.reset()
        provision(boto3.Session(region_name=REGION), template)
        api = InProcessApi(template)
        # Before any handler import: Powertools reads its environment when the module loads.
        os.environ.update(api.environment())
        get_settings.cache_clear()  # settings, clients and runtime config made anew, then forgotten
        container.reset()
        if streams is not None:
            stop_stream_records(keep={getattr(get_settings(), name) for name in streams})
        try:
            for logical_id in api.specs if handlers is None else handlers:
                api.handler(logical_id)
            with _function_logs_captured() as logs:
                try:
                    yield api
                except ScenarioError as error:
                    tail = "\n".join(logs.getvalue().splitlines()[-20:])
                    raise ScenarioError(f"{error}\n--- last function log lines ---\n{tail}") from None
        finally:
            mocked.reset()
            get_settings.cache_clear()
            container.reset()


_LOGS: list[io.StringIO] = []  # the buffer the functions log to, while a stack is up


def logged_characters() -> int:
    """How many characters the functions have logged so far on the stack that is up (0 without
    one): the difference around a request is what it logs."""
    return _LOGS[-1].tell() if _LOGS else 0


@contextmanager
def _function_logs_captured() -> Iterator[io.StringIO]:
    """Send the functions' log lines (Powertools writes JSON to stdout, Lambda's log stream) to a
    buffer for the block: the bench's stdout is its report. The buffer explains a failed scenario."""
    buffer = io.StringIO()
    loggers = [logging.getLogger(), *logging.Logger.manager.loggerDict.values()]
    redirected: list[tuple[logging.StreamHandler[Any], Any]] = []
    for logger in loggers:
        for handler in getattr(logger, "handlers", []):
            if isinstance(handler, logging.StreamHandler) and handler.stream in (sys.stdout, sys.__stdout__):
                redirected.append((handler, handler.setStream(buffer)))
    _LOGS.append(buffer)
    try:
        with redirect_stdout(buffer):  # metrics (EMF) are printed, not logged
            yield buffer
    finally:
        _LOGS.remove(buffer)
        for handler, stream in redirected:
            handler.setStream(stream)


def set_config(config: str = "warm") -> None:
    """Put the runtime-config cache in the state a measurement is about. Warm: fetched a moment ago
    (it lives 10 s, and a setup with argon2 on moto takes a good part of that). Cold: nothing cached,
    as in a new container."""
    source = cast("SsmRuntimeConfig", container.production_deps().config)  # what production_deps makes
    source.forget()
    if config == "warm":
        source.current()


def expect(what: str, status: int, reply: Reply) -> None:
    """Stop unless ``reply`` has ``status``."""
    if reply.status != status:
        raise ScenarioError(f"{what}: expected HTTP {status}, got {reply.status}: {reply.body}")


def batch_write(dynamodb: Any, table: str, requests: Sequence[dict[str, Any]]) -> None:
    """BatchWriteItem ``requests`` (PutRequest or DeleteRequest) to ``table``, 25 at a time (uncounted)."""
    for start in range(0, len(requests), 25):
        pending: dict[str, Any] = {table: list(requests[start : start + 25])}
        while pending:
            pending = dynamodb.batch_write_item(RequestItems=pending).get("UnprocessedItems") or {}
