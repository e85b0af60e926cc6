"""A recovery request made and handled, as the deployed stack does within a second: the Auth
function's ``POST /users/recover`` rules queue it, the recovery function's rules handle it."""

from __future__ import annotations

from auth_api import recovery
from auth_api.models import RecoverBody
from nimbus_core.domain.deps import Deps
from recovery_api.service import Outcome, handle_request


def ask_for_recovery(deps: Deps, name: str, now: float) -> Outcome:
    """Ask for a recovery link for ``name`` and handle the request at once; what became of it."""
    request = recovery.request_recovery(deps, RecoverBody.model_validate({"username": name}), now)
    return handle_request(deps, request, now)
