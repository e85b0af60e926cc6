"""What must hold in the users table at every moment, whatever ran concurrently or failed part way:
the writes that keep it are transactions, so these hold between any two of them.

- every username and address claim names a user whose key it is, and every user holds both claims;
- the user count (its shards) equals the number of users.

Read with a (consistent) Scan: for tests and operators only, never a request path.
"""

from __future__ import annotations

from typing import Any

from nimbus_core.adapters.items import from_item


def users_table_violations(dynamodb: Any, table: str = "UsersTable") -> list[str]:
    """Every broken invariant of the users table, in words (empty when all hold)."""
    items = [
        from_item(item)
        for page in dynamodb.get_paginator("scan").paginate(TableName=table, ConsistentRead=True)
        for item in page["Items"]
    ]
    users = {str(i["id"]): i for i in items if str(i["pk"]).startswith("USER#")}
    claims = {
        str(i["pk"]): str(i["userId"]) for i in items if str(i["pk"]).startswith(("USERNAME#", "EMAIL#"))
    }
    counted = sum(int(i.get("users", 0)) for i in items if str(i["pk"]).startswith("USERCOUNT#"))
    problems: list[str] = []
    for claim, holder in claims.items():
        user = users.get(holder)
        kind, _, key = claim.partition("#")
        field = "usernameKey" if kind == "USERNAME" else "emailKey"
        if user is None:
            problems.append(f"{claim} names user {holder}, who does not exist")
        elif user.get(field) != key:
            problems.append(f"{claim} names user {holder}, whose {field} is {user.get(field)!r}")
    for user_id, user in users.items():
        for kind, field in (("USERNAME", "usernameKey"), ("EMAIL", "emailKey")):
            if claims.get(f"{kind}#{user.get(field)}") != user_id:
                problems.append(f"user {user_id} does not hold its {kind.lower()} claim {user.get(field)!r}")
    if counted != len(users):
        problems.append(f"the user count says {counted}, the table holds {len(users)} users")
    return problems
