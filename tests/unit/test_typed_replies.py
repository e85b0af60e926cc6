"""What a route answers is typed: mypy refuses a payload that is not the view its route declares.

A snippet of routes is type-checked by mypy itself, with the repository's configuration (strict,
the product's import paths): each line marked ``# refused`` must be the line of an error, and
every other line must pass. The snippet answers what routes answer: a record's ``to_public()``,
a dict written in place, :func:`success`; and what they must not: another view's payload, a dict
with other keys, a value of the wrong type, a key too many.
"""

from __future__ import annotations

import re
from pathlib import Path

from mypy import api

REPO = Path(__file__).resolve().parents[2]
SNIPPET = """\
from __future__ import annotations

from nimbus_core.domain.errors import SuccessCode
from nimbus_core.domain.models import Session, User
from nimbus_core.http.responses import Reply, success
from nimbus_core.http.views import SessionView, SuccessView, UserListView, UserView


def a_record(user: User) -> Reply[UserView]:
    return Reply(user.to_public())


def a_list(users: list[User]) -> Reply[UserListView]:
    return Reply({"count": len(users), "items": [u.to_public() for u in users]})


def a_plain_success() -> Reply[SuccessView]:
    return success(SuccessCode.DELETE_USER_SUCCESS)


def nothing_of_a_user() -> Reply[UserView]:
    return Reply({"nothing": 1})  # refused


def a_key_of_the_wrong_type(user: User) -> Reply[UserView]:
    return Reply({**user.to_public(), "staff": "yes"})  # refused


def a_key_too_many(user: User) -> Reply[UserView]:
    return Reply({**user.to_public(), "password": "hunter2"})  # refused


def another_view(session: Session) -> Reply[UserView]:
    return Reply(session.to_public())  # refused


def a_session_declared_as_a_user(session: Session) -> Reply[SessionView]:
    answer: Reply[UserView] = Reply(session.to_public())  # refused
    return answer  # refused
"""
_ERROR = re.compile(r"^(?P<file>[^:]+):(?P<line>\d+): error: (?P<text>.*)$", re.M)


def _mypy(source: str, tmp_path: Path) -> tuple[list[tuple[int, str]], str]:
    """mypy's errors on ``source`` (line, text), checked with the repository's configuration
    (pyproject.toml, run from the repository as ``make typecheck`` does), and its whole report."""
    snippet = tmp_path / "routes_snippet.py"
    snippet.write_text(source)
    config = str(REPO / "pyproject.toml")
    cache = str(REPO / ".mypy_cache")  # the repository's own: only the snippet is new to it
    out, err, _status = api.run(["--config-file", config, "--cache-dir", cache, str(snippet)])
    found = [(int(m["line"]), m["text"]) for m in _ERROR.finditer(out) if m["file"].endswith(snippet.name)]
    return found, out + err


def _refused_lines(source: str) -> set[int]:
    return {n for n, line in enumerate(source.splitlines(), 1) if line.endswith("# refused")}


def test_mypy_refuses_a_reply_whose_payload_is_not_the_view_its_route_declares(tmp_path: Path) -> None:
    errors, report = _mypy(SNIPPET, tmp_path)
    assert {line for line, _ in errors} == _refused_lines(SNIPPET), report
    texts = "\n".join(text for _, text in errors)
    assert 'Extra key "nothing" for TypedDict "UserView"' in texts
    assert 'TypedDict item "staff" has type "bool"' in texts
    assert 'Extra key "password" for TypedDict "UserView"' in texts
