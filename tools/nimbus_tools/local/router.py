"""HTTP API route matching with API Gateway's priorities: literal segments beat ``{param}``, which
beats a greedy ``{proxy+}``; the request's method beats ``ANY`` on the same path; ``$default``
catches everything else (a known path with an unknown method too)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from urllib.parse import unquote

from nimbus_tools.template import FunctionSpec, HttpRoute

# Segment kinds, most specific first (a lower number wins).
_LITERAL, _PARAM, _GREEDY = 0, 1, 2


@dataclass(frozen=True)
class RouteTarget:
    """A route and the function it invokes."""

    route: HttpRoute
    function: str


@dataclass(frozen=True)
class RouteMatch:
    """The route a request matched and its decoded path parameters."""

    target: RouteTarget
    path_parameters: dict[str, str]

    @property
    def route_key(self) -> str:
        """``"GET /users/{id}"`` or ``"$default"``."""
        return self.target.route.route_key

    @property
    def function(self) -> str:
        """The logical id of the function to invoke."""
        return self.target.function


def _segments(path: str) -> list[str]:
    # Slashes at either end do not count: a trailing slash is tolerated.
    return path.strip("/").split("/") if path.strip("/") else []


def _kind(segment: str) -> int:
    if segment.startswith("{") and segment.endswith("+}"):
        return _GREEDY
    if segment.startswith("{") and segment.endswith("}"):
        return _PARAM
    return _LITERAL


class Router:
    """Matches requests against the HttpApi routes of the template's functions."""

    def __init__(self, targets: Iterable[RouteTarget]) -> None:
        self._routes: list[tuple[RouteTarget, list[str]]] = []
        self._default: RouteTarget | None = None
        for target in targets:
            if target.route.path == "$default":
                self._default = target
            else:
                self._routes.append((target, _segments(target.route.path)))

    @classmethod
    def from_specs(cls, specs: Iterable[FunctionSpec]) -> Router:
        """A router over every HttpApi route of ``specs``."""
        return cls(RouteTarget(route, spec.logical_id) for spec in specs for route in spec.routes)

    def match(self, method: str, raw_path: str) -> RouteMatch | None:
        """The route for ``method raw_path`` (raw_path without the query), or None if nothing matches."""
        method = method.upper()
        request_segments = _segments(raw_path)
        best: tuple[tuple[int, ...], RouteTarget, dict[str, str]] | None = None
        for target, route_segments in self._routes:
            if target.route.method not in (method, "ANY"):
                continue
            parameters = _match_segments(route_segments, request_segments)
            if parameters is None:
                continue
            # Specificity: segment kinds left to right, then an exact method before ANY.
            rank = (*(_kind(s) for s in route_segments), _GREEDY + 1, int(target.route.method == "ANY"))
            if best is None or rank < best[0]:
                best = (rank, target, parameters)
        if best is not None:
            return RouteMatch(best[1], best[2])
        return RouteMatch(self._default, {}) if self._default is not None else None


def _match_segments(route: list[str], request: list[str]) -> dict[str, str] | None:
    parameters: dict[str, str] = {}
    for index, segment in enumerate(route):
        kind = _kind(segment)
        if kind == _GREEDY:
            rest = request[index:]
            if not rest:
                return None  # {proxy+} needs at least one segment
            parameters[segment[1:-2]] = unquote("/".join(rest))
            return parameters
        if index >= len(request):
            return None
        if kind == _PARAM:
            if not request[index]:
                return None
            parameters[segment[1:-1]] = unquote(request[index])
        elif unquote(request[index]) != segment:
            return None
    return parameters if len(route) == len(request) else None
