"""What every step of the guard is (:class:`Step`, :class:`Check`), and what they share while one
request passes them (:class:`Passage`)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from nimbus_core.domain.errors import ErrorCode

if TYPE_CHECKING:
    from nimbus_core.http.event import HttpEvent
    from nimbus_core.http.policy import Endpoint
    from nimbus_core.http.request import Request
    from nimbus_core.http.responses import Response
    from nimbus_core.sessions.auth import Caller

type Refusal = tuple[int, ErrorCode]
"""An error a step can answer: its status and code."""

type Proceed = Callable[[], Response]
"""The steps after this one, then the route: the response they answer."""


@dataclass(slots=True)
class Passage:
    """One request on its way through the steps: the endpoint it was routed to, its event, the
    :class:`Request` the route will get, and what the steps learn for the later ones."""

    endpoint: Endpoint
    event: HttpEvent
    request: Request[Any, Any, Any]
    # The values each path parameter must not take: a sibling route spells them literally.
    reserved: Mapping[str, frozenset[str]]
    # The caller the session step let through: None where the endpoint takes no session (a staff
    # token read to pass a kill switch is no caller for the later steps), or refuses one.
    caller: Caller | None = None
    # A reverified request's body, read early to find the challenge it answers (None: not read).
    peeked: dict[str, Any] | None = None


class Step:
    """One step of the guard: whether it applies to an endpoint, what it can answer there, and
    :meth:`run`, which answers for the request or hands it on (``proceed``)."""

    def applies(self, endpoint: Endpoint) -> bool:
        """Whether the guard runs this step for ``endpoint`` (decided once, when it is guarded)."""
        return True

    def errors(self, endpoint: Endpoint) -> frozenset[Refusal]:
        """The errors this step can answer for ``endpoint``, where it applies."""
        return frozenset()

    def run(self, passage: Passage, proceed: Proceed) -> Response:
        """The response for ``passage``: usually ``proceed()``'s, around this step's work."""
        raise NotImplementedError


class Check(Step):
    """A step that refuses or lets through, and has no part in what comes after."""

    def run(self, passage: Passage, proceed: Proceed) -> Response:
        """Refuse (raise), or answer what the next steps answer."""
        self.check(passage)
        return proceed()

    def check(self, passage: Passage) -> None:
        """Raise the step's refusal, or pass."""
        raise NotImplementedError


def answered(*codes: ErrorCode) -> frozenset[Refusal]:
    """``codes``, each with its own status, as a step declares them."""
    return frozenset((code.status, code) for code in codes)
