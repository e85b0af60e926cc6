"""Route matching: which declared route answers ``METHOD /path``, and its path parameters.

Paths are declared as ``/users/<uid>/sessions/<sid>``. The rules are the ones Powertools'
APIGatewayHttpResolver applied (aws_lambda_powertools 3.37, ``event_handler/api_gateway.py``), kept
so that no request changes route:

- a ``<name>`` segment matches one or more characters from :data:`PARAM_CHARS` (word characters,
  Unicode included, and the URI punctuation Powertools lists); never ``/``, ``?``, ``#``, ``"``,
  a backquote, a backslash or a control character. The value is the raw, still percent-encoded text
  of the path: ``%2F`` stays ``%2F``, it is never URL-decoded;
- methods compare upper-cased (``get`` is GET); paths compare exactly (``/USERS`` is not ``/users``);
- a route without parameters wins over every route with one; among the others, literal segments
  win over parameters segment by segment from the left (``/users/<uid>/sessions/all`` before
  ``/users/<uid>/sessions/<sid>``, as API Gateway does), and otherwise the first declared wins.

One difference, deliberately: a path must match to its very end. Powertools' ``^...$`` also took a
path ending in a newline (``/users/me\\n``), which no HTTP request can carry; this table does not.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

# Powertools' _SAFE_URI ("-._~()'!*:@,;=+&$", RFC 3986) and _UNSAFE_URI ("%<> []{}|^"), plus \w.
PARAM_CHARS = r"-._~()'!*:@,;=+&$%<> \[\]{}|^\w"
_PARAM = re.compile(r"<(\w+)>")


class DuplicateRouteError(ValueError):
    """The same method and path declared twice: the second could never answer."""


def is_param(segment: str) -> bool:
    """Whether a declared path segment is a parameter (``<name>``)."""
    return segment.startswith("<") and segment.endswith(">")


def path_pattern(path: str) -> re.Pattern[str] | None:
    """The compiled matcher of a declared path with parameters; None for a path without any."""
    if not _PARAM.search(path):
        return None
    pieces = _PARAM.split(path)  # literal, name, literal, name, ..., literal
    regex = "".join(
        re.escape(piece) if i % 2 == 0 else f"(?P<{piece}>[{PARAM_CHARS}]+)" for i, piece in enumerate(pieces)
    )
    return re.compile(regex)


def _literals_first(path: str) -> list[bool]:
    return [is_param(segment) for segment in path.strip("/").split("/")]


@dataclass(frozen=True, slots=True)
class RouteTable[T]:
    """Declared routes, ready to match: the parameterless ones by a dictionary lookup, the others
    by precompiled patterns, per method, in the order they must be tried."""

    static: dict[tuple[str, str], T]
    dynamic: dict[str, tuple[tuple[re.Pattern[str], T], ...]]

    @classmethod
    def build(cls, routes: Iterable[tuple[str, str, T]]) -> RouteTable[T]:
        """The table of ``(method, path, target)`` routes; refuses a method and path declared twice."""
        static: dict[tuple[str, str], T] = {}
        dynamic: dict[str, list[tuple[str, re.Pattern[str], T]]] = {}
        seen: set[tuple[str, str]] = set()
        for method, path, target in routes:
            key = (method.upper(), path)
            if key in seen:
                raise DuplicateRouteError(f"{key[0]} {path} is declared twice")
            seen.add(key)
            pattern = path_pattern(path)
            if pattern is None:
                static[key] = target
            else:
                dynamic.setdefault(key[0], []).append((path, pattern, target))
        ordered = {
            method: tuple(
                (pattern, target)
                for _path, pattern, target in sorted(found, key=lambda r: _literals_first(r[0]))
            )
            for method, found in dynamic.items()
        }
        return cls(static, ordered)

    def match(self, method: str, path: str) -> tuple[T, dict[str, str]] | None:
        """The target answering ``method path`` (method already upper-cased) and its path
        parameters, or None when no route does (404)."""
        target = self.static.get((method, path))
        if target is not None:
            return target, {}
        for pattern, candidate in self.dynamic.get(method, ()):
            found = pattern.fullmatch(path)
            if found is not None:
                return candidate, found.groupdict()
        return None


def literal_siblings(paths: Iterable[str]) -> dict[str, dict[str, frozenset[str]]]:
    """Per path with parameters, the values each parameter must not take because a sibling route
    spells them literally (CONTRACT section 1: literal segments win over parameters).

    API Gateway already prefers ``DELETE /users/me/sessions/all`` to ``/users/me/sessions/{sid}``,
    but a GET of ``.../sessions/all`` has no literal route and reaches ``{sid}`` with ``sid=all``:
    that must be 404 INVALID_ENDPOINT_ERROR, not a lookup of a session named "all". The methods do
    not matter: a literal under any method reserves the value.
    """
    split = {path: path.strip("/").split("/") for path in paths}
    reserved: dict[str, dict[str, set[str]]] = {}
    for path, segments in split.items():
        for other in split.values():
            if len(other) != len(segments):
                continue
            differing = [i for i, (a, b) in enumerate(zip(segments, other, strict=True)) if not _same(a, b)]
            if len(differing) == 1 and is_param(segments[i := differing[0]]) and not is_param(other[i]):
                reserved.setdefault(path, {}).setdefault(segments[i][1:-1], set()).add(other[i])
    return {p: {name: frozenset(values) for name, values in params.items()} for p, params in reserved.items()}


def _same(a: str, b: str) -> bool:
    return a == b or (is_param(a) and is_param(b))
