"""A request's raw input, read without pydantic (CONTRACT section 2): the JSON body, the query
string, and the text rule of the names the guard checks itself (``X-Session-Name``).

The guard and the event accessors import this module when a handler is imported; the pydantic models
that validate bodies, queries and path parameters (:mod:`nimbus_core.http.validation` and the functions'
``*_api.models``) are imported only by the first request that needs one.

- not JSON, not UTF-8, not an object, or carrying invalid Unicode -> INVALID_BODY_ERROR
- larger than :data:`MAX_BODY_BYTES` once decoded -> BODY_TOO_LARGE_ERROR
"""

from __future__ import annotations

import base64
import binascii
import json
import unicodedata
from typing import Any

from nimbus_core.domain.errors import ErrorCode, NimbusError

MAX_BODY_BYTES = 64 * 1024

MAX_NAME = 64
"""The longest session or second-factor name, in characters."""


def printable(value: str) -> bool:
    """No control or format characters (newlines, NUL, bidi overrides would forge lines in lists
    and logs)."""
    return all(unicodedata.category(c)[0] != "C" for c in value)


def session_name(headers: dict[str, str]) -> str | None:
    """The ``X-Session-Name`` given (spaces around it trimmed), None when none is; 400
    INVALID_FIELDS_ERROR when it is empty, longer than :data:`MAX_NAME` or not printable."""
    given = headers.get("x-session-name")
    if given is None:
        return None
    name = given.strip(" ")
    if not 1 <= len(name) <= MAX_NAME or not printable(name):
        raise NimbusError(ErrorCode.INVALID_FIELDS_ERROR, fields=["X-Session-Name"])
    return name


def read_query(params: dict[str, str] | None) -> dict[str, str]:
    """The query-string parameters (API Gateway joins repeated keys with commas)."""
    return dict(params or {})


def read_json_body(raw: str | None, *, is_base64: bool = False) -> dict[str, Any]:
    """The request body as a JSON object; a missing body counts as ``{}``."""
    if raw is None or raw == "":
        return {}
    try:
        data = base64.b64decode(raw, validate=True) if is_base64 else raw.encode("utf-8", "strict")
    except (ValueError, binascii.Error):
        raise NimbusError(ErrorCode.INVALID_BODY_ERROR) from None
    if len(data) > MAX_BODY_BYTES:
        raise NimbusError(ErrorCode.BODY_TOO_LARGE_ERROR)
    try:
        value = json.loads(
            data.decode("utf-8", "strict"), parse_constant=_refuse_constant, object_pairs_hook=_unique_keys
        )
    except (ValueError, UnicodeError, RecursionError):
        raise NimbusError(ErrorCode.INVALID_BODY_ERROR) from None
    if not isinstance(value, dict) or not _valid_unicode(value):
        raise NimbusError(ErrorCode.INVALID_BODY_ERROR)
    return value


def _refuse_constant(name: str) -> Any:
    """NaN, Infinity and -Infinity are not JSON; strict parsers refuse them."""
    raise ValueError(f"{name} is not JSON")


def _unique_keys(pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    """An object, refusing duplicated keys (parsers disagree on which value wins)."""
    value = dict(pairs)
    if len(value) != len(pairs):
        raise ValueError("duplicate key")
    return value


def _valid_unicode(value: Any) -> bool:
    """False when any string holds a lone surrogate (JSON allows "\\ud800"; UTF-8 does not)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            try:
                item.encode("utf-8")
            except UnicodeEncodeError:
                return False
        elif isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, list):
            stack.extend(item)
    return True
