"""The sampler thread: memory, items and mail every few seconds, invariants now and then, expired
rate-limit counters deleted, progress printed."""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable

from bench.soak.checks import Checks
from bench.soak.client import Soak
from bench.soak.memory import MIB, Sample, process_tree_rss
from nimbus_tools.local.control import ControlError, clear_mail

EXPIRY_SECONDS = 10.0  # how often the counters of finished users are deleted (moto has no TTL)
PROGRESS_SECONDS = 15.0
SETTLE_SECONDS = 60.0  # at most, after the traffic, for the stream-fed functions to catch up


def table_items(soak: Soak) -> dict[str, int]:
    """Items per table of the stack (DescribeTable; moto counts them live)."""
    return {
        logical: int(soak.dynamodb.describe_table(TableName=table)["Table"].get("ItemCount", 0))
        for logical, table in soak.state["tables"].items()
    }


def mails_sent(soak: Soak) -> int:
    """Emails SES accepted since the emulator started (moto keeps every one)."""
    return int(soak.ses.get_send_quota()["SentLast24Hours"])


class Sampler:
    """Memory, items and mail every few seconds; invariants every ``invariant_seconds``."""

    def __init__(
        self,
        soak: Soak,
        pid: int,
        *,
        started: float,
        every: float,
        invariant_every: float,
        tidy: Callable[[], None],
    ) -> None:
        self.soak, self.pid, self.started = soak, pid, started
        self.every, self.invariant_every, self.tidy = every, invariant_every, tidy
        self.samples: list[Sample] = []
        self.checks = Checks()
        self.expired = 0  # rate-limit counters of retired subjects deleted
        self.errors: list[str] = []

    def read(self) -> Sample:
        """One reading (the emulator's captured mail is cleared first: the traffic reads tokens
        from the outbox table, and the capture would otherwise grow without bound)."""
        try:
            clear_mail(self.soak.state["aws_endpoint_url"])
        except ControlError as error:
            self.errors.append(f"clearing the captured mail: {error}")
        self.tidy()
        return Sample(
            at=time.monotonic() - self.started,
            rss=process_tree_rss(self.pid),
            items=sum(table_items(self.soak).values()),
            mails=mails_sent(self.soak),
        )

    def sample(self) -> Sample:
        """One reading, kept among the judged samples."""
        reading = self.read()
        self.samples.append(reading)
        return reading

    def settle(self) -> tuple[Sample, float]:
        """After the traffic, the stream-fed functions catch up (mail sent, deleted users' sessions
        and mail swept): a reading once items and mail stop changing between two readings (at most
        :data:`SETTLE_SECONDS`), and the seconds that took."""
        started = time.monotonic()
        self.expired += self.soak.expire_counters()
        last = self.read()
        while time.monotonic() - started < SETTLE_SECONDS:
            time.sleep(self.every)
            now = self.read()
            if (now.items, now.mails) == (last.items, last.mails):
                return now, time.monotonic() - started
            last = now
        return last, time.monotonic() - started

    def run(self) -> None:
        """Until the traffic has stopped."""
        next_check = self.started + self.invariant_every
        next_progress = self.started + PROGRESS_SECONDS
        next_expiry = self.started + EXPIRY_SECONDS
        while not self.soak.stop.wait(
            max(0.0, self.started + len(self.samples) * self.every - time.monotonic())
        ):
            try:
                reading = self.sample()
                now = time.monotonic()
                if now >= next_expiry:
                    self.expired += self.soak.expire_counters()
                    next_expiry = now + EXPIRY_SECONDS
                if now >= next_check:
                    self.checks.check(self.soak, settled=False)
                    next_check = now + self.invariant_every
                if now >= next_progress:
                    next_progress = now + PROGRESS_SECONDS
                    recorder = self.soak.recorder
                    main = reading.rss.get(self.pid, 0) / MIB
                    print(
                        f"  {reading.at:5.0f} s {recorder.requests:7d} requests  {recorder.server_errors} 5xx"
                        f"  RSS {reading.total / MIB:6.1f} MiB (main {main:5.1f})"
                        f"  {reading.items} items  {reading.mails} emails",
                        flush=True,
                    )
            except Exception:
                self.errors.append(traceback.format_exc())
                self.soak.recorder.soak_errors += 1
