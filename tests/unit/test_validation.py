"""Body parsing and validation map every bad input to its CONTRACT error, never an exception."""

from __future__ import annotations

import base64
import json
from typing import Any

import pytest
from pydantic import Field

from auth_api.models import LoginBody, RegisterBody
from nimbus_core.domain.errors import ErrorCode, NimbusError
from nimbus_core.http.request_input import read_json_body, read_query
from nimbus_core.http.validation import (
    EVERY_ITEM,
    Body,
    Pagination,
    Query,
    QueryBool,
    WholeListLimit,
    validate,
)

GOOD = {"username": "alice", "email": "alice@example.com", "password": "correct horse"}


def _error(fn: Any, *args: Any) -> NimbusError:
    with pytest.raises(NimbusError) as info:
        fn(*args)
    return info.value


@pytest.mark.parametrize(
    "raw",
    ["not json", "[1, 2]", '"a string"', "42", "null", '{"a": 1', '{"a": "\\ud800"}', "[" * 60_000],
)
def test_bodies_that_are_not_json_objects_are_invalid_body(raw: str) -> None:
    assert _error(read_json_body, raw).code is ErrorCode.INVALID_BODY_ERROR


def test_missing_body_counts_as_empty_object() -> None:
    assert read_json_body(None) == {}
    assert read_json_body("") == {}


def test_base64_body_that_is_not_utf8_is_invalid_body() -> None:
    raw = base64.b64encode(b'{"username": "\xff\xfe"}').decode()
    assert _error(lambda: read_json_body(raw, is_base64=True)).code is ErrorCode.INVALID_BODY_ERROR


def test_base64_json_body_is_decoded() -> None:
    raw = base64.b64encode(json.dumps(GOOD).encode()).decode()
    assert read_json_body(raw, is_base64=True) == GOOD


def test_a_body_over_64_kib_is_body_too_large_before_it_is_parsed() -> None:
    assert _error(read_json_body, "{" * (64 * 1024 + 1)).code is ErrorCode.BODY_TOO_LARGE_ERROR
    assert read_json_body(json.dumps({"username": "a" * (64 * 1024 - 20)}))["username"]


@pytest.mark.parametrize(
    "raw",
    ['{"a": NaN}', '{"a": Infinity}', '{"a": -Infinity}', '{"a": 1, "a": 2}', '{"x": {"b": 1, "b": 1}}'],
)
def test_json_that_strict_parsers_disagree_on_is_invalid_body(raw: str) -> None:
    assert _error(read_json_body, raw).code is ErrorCode.INVALID_BODY_ERROR


def test_every_missing_null_or_mistyped_field_is_named_once() -> None:
    error = _error(validate, RegisterBody, {"username": None, "email": 5, "rememberMe": "yes"})
    assert error.code is ErrorCode.MISSING_FIELDS_ERROR
    assert error.body()["fields"] == ["username", "email", "password", "rememberMe"]


@pytest.mark.parametrize(
    "username",
    [
        "",
        "   ",
        "a" * 65,
        "bad name",
        "ünïcode",
        "emoji😀",
        "nul\x00byte",
        "tab\tname",
        "new\nline",
        "semi;colon",
    ],
)
def test_usernames_outside_the_pattern_are_invalid_username(username: str) -> None:
    error = _error(validate, RegisterBody, {**GOOD, "username": username})
    assert error.code is ErrorCode.INVALID_USERNAME_ERROR


def test_username_is_trimmed_of_surrounding_spaces() -> None:
    body = validate(RegisterBody, {**GOOD, "username": "  alice.b-c_d  "})
    assert body.username == "alice.b-c_d"


@pytest.mark.parametrize(
    "email", ["plainaddress", "a@", "@b.com", "a@b@c.com", "a" * 250 + "@x.com", "a b@c.com"]
)
def test_malformed_emails_are_invalid_email(email: str) -> None:
    assert _error(validate, RegisterBody, {**GOOD, "email": email}).code is ErrorCode.INVALID_EMAIL_ERROR


def test_email_is_trimmed_and_normalised() -> None:
    assert validate(RegisterBody, {**GOOD, "email": " Alice@EXAMPLE.com "}).email == "Alice@example.com"


@pytest.mark.parametrize("password", ["short", "x" * 65])
def test_register_password_outside_8_to_64_is_invalid_fields(password: str) -> None:
    error = _error(validate, RegisterBody, {**GOOD, "password": password})
    assert error.code is ErrorCode.INVALID_FIELDS_ERROR
    assert error.body()["fields"] == ["password"]


def test_passwords_are_never_trimmed() -> None:
    assert validate(LoginBody, {"username": " alice ", "password": "  spaced  "}).password == "  spaced  "
    assert validate(RegisterBody, {**GOOD, "password": "  spaced  "}).password == "  spaced  "


def test_unknown_fields_are_ignored() -> None:
    assert validate(LoginBody, {"username": "a", "password": "b", "extra": [1, {"x": None}]}).username == "a"


def test_missing_fields_win_over_invalid_ones() -> None:
    error = _error(validate, RegisterBody, {"username": "bad name", "password": "short"})
    assert error.code is ErrorCode.MISSING_FIELDS_ERROR
    assert error.body()["fields"] == ["email"]


def test_bounds_on_other_fields_are_invalid_fields() -> None:
    class Named(Body):
        name: str = Field(min_length=1, max_length=3)

    error = _error(validate, Named, {"name": "toolong"})
    assert (error.code, error.body()["fields"]) == (ErrorCode.INVALID_FIELDS_ERROR, ["name"])


@pytest.mark.parametrize(
    ("query", "limit", "offset"),
    [
        ({}, 50, 0),
        ({"limit": "10", "offset": "20"}, 10, 20),
        ({"limit": "500"}, 50, 0),
        ({"limit": "-3", "offset": "-7"}, 50, 0),  # negative: the defaults, never an empty page
        ({"limit": "-1"}, 50, 0),  # every item is GET /domains' alone
        ({"limit": "0"}, 0, 0),
        ({"offset": "9223372036854775807"}, 50, 9223372036854775807),  # past any list: an empty page
        ({"limit": "ten", "offset": "x"}, 50, 0),
        ({"limit": "", "offset": " 4 "}, 50, 4),
    ],
)
def test_pagination_clamps_and_falls_back_to_defaults(query: dict[str, str], limit: int, offset: int) -> None:
    page = validate(Pagination, read_query(query))
    assert (page.limit, page.offset) == (limit, offset)


class _WholeList(Pagination):
    limit: WholeListLimit = 50


@pytest.mark.parametrize(
    ("raw", "limit"), [("-1", EVERY_ITEM), ("-2", 50), ("51", 50), ("7", 7), ("all", 50)]
)
def test_a_list_that_can_be_had_whole_takes_minus_one_and_nothing_else_out_of_range(
    raw: str, limit: int
) -> None:
    assert validate(_WholeList, {"limit": raw}).limit == limit


class _Flags(Query):
    include_self: QueryBool = Field(False, alias="include-self")


@pytest.mark.parametrize(
    ("raw", "value"), [("true", True), ("TRUE", True), ("1", True), ("false", False), ("0", False)]
)
def test_boolean_query_flags_accept_true_false_1_0(raw: str, value: bool) -> None:
    assert validate(_Flags, {"include-self": raw}).include_self is value


@pytest.mark.parametrize("raw", ["yes", "2", "", "truthy"])
def test_other_boolean_query_values_are_invalid_fields(raw: str) -> None:
    error = _error(validate, _Flags, {"include-self": raw})
    assert (error.code, error.body()["fields"]) == (ErrorCode.INVALID_FIELDS_ERROR, ["include-self"])
