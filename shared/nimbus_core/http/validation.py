"""Request validation with pydantic, mapped onto the contract's errors (CONTRACT section 2): the
base classes and field types of the body, query and path models, and :func:`validate`.

Imported with the first request that validates a model, never by a handler's import: reading the
body and the query string is :mod:`nimbus_core.http.request_input`'s, without pydantic.

- required field missing, null or of the wrong JSON type -> MISSING_FIELDS_ERROR (every such field)
- username / email malformed -> INVALID_USERNAME_ERROR / INVALID_EMAIL_ERROR
- any other bound broken (length, range) -> INVALID_FIELDS_ERROR (every such field)
"""

from __future__ import annotations

import re
from typing import Annotated, Any

from pydantic import AfterValidator, BaseModel, BeforeValidator, ConfigDict, ValidationError
from pydantic_core import PydanticCustomError

from nimbus_core.domain.errors import ErrorCode, NimbusError
from nimbus_core.http.request_input import MAX_NAME, printable

_USERNAME = re.compile(r"[A-Za-z0-9_.-]{1,64}")
_MISSING_TYPES = frozenset(
    {
        "missing",
        "string_type",
        "bool_type",
        "int_type",
        "list_type",
        "dict_type",
        "model_type",
        "int_from_float",
        "is_instance_of",
        "none_required",
    }
)
_OWN_CODES = {
    "invalid_username": ErrorCode.INVALID_USERNAME_ERROR,
    "invalid_email": ErrorCode.INVALID_EMAIL_ERROR,
    "passwords_do_not_match": ErrorCode.PASSWORDS_DO_NOT_MATCH_ERROR,
    "subdomain_too_long": ErrorCode.SUBDOMAIN_TOO_LONG_ERROR,
    "too_many_ids": ErrorCode.BODY_TOO_LARGE_ERROR,
    "invalid_loglevel": ErrorCode.INVALID_LOGLEVEL_ERROR,
}


class Body(BaseModel):
    """Base of every request body model: strict JSON types, unknown fields ignored."""

    # defer_build: a model's validator is built on first use, so a function pays only for its routes.
    model_config = ConfigDict(strict=True, extra="ignore", frozen=True, defer_build=True)


class Query(BaseModel):
    """Base of every query-string model: values arrive as strings, unknown parameters are ignored."""

    model_config = ConfigDict(extra="ignore", frozen=True, defer_build=True)


def trim(value: Any) -> Any:
    """Strip surrounding spaces from strings (usernames, emails, names, reasons; never passwords)."""
    return value.strip(" ") if isinstance(value, str) else value


def _check_username(value: str) -> str:
    if not _USERNAME.fullmatch(value):
        raise PydanticCustomError("invalid_username", "invalid username")
    return value


def _check_email(value: str) -> str:
    # email-validator is imported here, not at module level: only the routes that take an address pay for it.
    from email_validator import EmailNotValidError, validate_email

    if len(value) > 254:
        raise PydanticCustomError("invalid_email", "invalid email")
    try:
        return validate_email(value, check_deliverability=False).normalized
    except EmailNotValidError:
        raise PydanticCustomError("invalid_email", "invalid email") from None


def _check_name(value: str) -> str:
    if not 1 <= len(value) <= MAX_NAME or not printable(value):
        raise PydanticCustomError("invalid_name", "names are 1 to 64 printable characters")
    return value


MAX_IDS = 50


def _check_ids(value: list[str]) -> list[str]:
    if len(value) > MAX_IDS:
        raise PydanticCustomError("too_many_ids", "at most 50 ids")
    return value


Username = Annotated[str, BeforeValidator(trim), AfterValidator(_check_username)]
"""A username, trimmed, matching ``^[A-Za-z0-9_.-]{1,64}$``."""

EmailAddress = Annotated[str, BeforeValidator(trim), AfterValidator(_check_email)]
"""An email address, trimmed, checked and normalised by email-validator."""

Name = Annotated[str, BeforeValidator(trim), AfterValidator(_check_name)]
"""A session name: trimmed, 1 to 64 printable characters (else INVALID_FIELDS_ERROR)."""

IdList = Annotated[list[str], AfterValidator(_check_ids)]
"""An ``ids`` array of strings: more than 50 is BODY_TOO_LARGE_ERROR (CONTRACT section 2)."""


def _lenient_int(
    default: int, low: int, high: int | None, *, also: frozenset[int] = frozenset()
) -> BeforeValidator:
    """Parse an integer query value: unparsable or below ``low`` means ``default`` (as upstream), above
    ``high`` is clamped; a value of ``also`` is taken as it is."""

    def parse(value: Any) -> int:
        try:
            number = int(str(value).strip())
        except ValueError:
            return default
        if number in also:
            return number
        if number < low:
            return default
        return min(number, high) if high is not None else number

    return BeforeValidator(parse)


def _query_bool(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    text = str(value).strip().lower()
    if text in {"true", "1"}:
        return True
    if text in {"false", "0"}:
        return False
    raise PydanticCustomError("query_bool", "expected true, false, 1 or 0")


MAX_PAGE_SIZE = 50

PageLimit = Annotated[int, _lenient_int(MAX_PAGE_SIZE, 0, MAX_PAGE_SIZE)]
"""``limit``: 0..50, default 50; larger values are clamped, unparsable and negative ones fall back to
the default (CONTRACT section 2: never an empty page for an out-of-range limit)."""

EVERY_ITEM = -1
"""``limit=-1`` of ``GET /domains``: every item in one page (upstream's ``LimitOffset(-1, 50)``)."""

WholeListLimit = Annotated[int, _lenient_int(MAX_PAGE_SIZE, 0, MAX_PAGE_SIZE, also=frozenset({EVERY_ITEM}))]
"""``limit`` of a list that can be had whole: :data:`PageLimit`, and ``-1`` for every item."""

PageOffset = Annotated[int, _lenient_int(0, 0, None)]
"""``offset``: an integer >= 0, default 0 (unparsable and negative ones too); past the end of a list
is an empty page."""

QueryBool = Annotated[bool, BeforeValidator(_query_bool)]
"""A boolean query flag: true/false/1/0 (any case); anything else is INVALID_FIELDS_ERROR."""


class Pagination(Query):
    """``?limit=&offset=`` of every list endpoint (CONTRACT section 2)."""

    limit: PageLimit = MAX_PAGE_SIZE
    offset: PageOffset = 0


def validate[M: BaseModel](model: type[M], data: dict[str, Any]) -> M:
    """Validate ``data`` against ``model`` and raise the contract error for the first failing class."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise _to_nimbus_error(exc) from None


def _to_nimbus_error(exc: ValidationError) -> NimbusError:
    missing: list[str] = []
    invalid: list[str] = []
    own: list[ErrorCode] = []
    for error in exc.errors():
        field = str(error["loc"][0]) if error["loc"] else "body"
        if error["type"] in _MISSING_TYPES:
            missing.append(field)
        elif error["type"] in _OWN_CODES:
            own.append(_OWN_CODES[error["type"]])
        else:
            invalid.append(field)
    if missing:
        return NimbusError(ErrorCode.MISSING_FIELDS_ERROR, fields=_unique(missing))
    if own:
        return NimbusError(own[0])
    return NimbusError(ErrorCode.INVALID_FIELDS_ERROR, fields=_unique(invalid))


def _unique(names: list[str]) -> list[str]:
    return list(dict.fromkeys(names))
