"""Request bodies and queries of the session endpoints (``password`` and ``2fa`` are the guard's)."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, model_validator

from nimbus_core.domain.scopes import ALL_BITS
from nimbus_core.http.validation import Body, IdList, Name, Pagination, Query, QueryBool


class SessionsQuery(Pagination):
    """GET /users/me/sessions and GET /users/:uid/sessions: pagination only."""


class RenameSessionBody(Body):
    """PATCH .../sessions/:sid."""

    name: Name


class DeleteSessionsBody(Body):
    """DELETE .../sessions: at most 50 ids; ``me`` names the calling session (own endpoint only)."""

    ids: IdList


class DeleteAllSessionsQuery(Query):
    """DELETE /users/me/sessions/all: ``include-self``, also spelled ``includeSelf`` (the client
    library's spelling); true/false/1/0."""

    include_self: QueryBool = Field(False, alias="include-self")

    @model_validator(mode="before")
    @classmethod
    def _one_spelling(cls, data: Any) -> Any:
        # Errors name the field as the CONTRACT does, whichever spelling the client used.
        if isinstance(data, dict) and "include-self" not in data and "includeSelf" in data:
            return {**data, "include-self": data["includeSelf"]}
        return data


PermissionFlags = Annotated[int, Field(ge=1, le=ALL_BITS)]


class CreateScopedSessionBody(Body):
    """POST /users/me/sessions: a name, the scopes (only the seed's bits) and the lifetime."""

    name: Name
    permission_flags: PermissionFlags = Field(alias="permissionFlags")
    long_lived: bool = Field(False, alias="longLived")
