"""The domains table: every offered domain in one partition (``pk = DOMAIN``, ``id`` = the name),
so listing them is a Query, never a Scan."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from nimbus_core.adapters.errors import aws_errors, error_code
from nimbus_core.adapters.items import read_record, record_item
from nimbus_core.domain.models import Domain

if TYPE_CHECKING:
    from types_boto3_dynamodb import DynamoDBClient

PARTITION = "DOMAIN"


def _key(name: str) -> dict[str, Any]:
    return {"pk": {"S": PARTITION}, "id": {"S": name}}


class DynamoDomains:
    """The :class:`nimbus_core.domain.deployment_ports.DomainStore` on the domains table."""

    def __init__(self, client: DynamoDBClient, table: str) -> None:
        self._client = client
        self._table = table

    def list(self) -> list[Domain]:
        """Every offered domain, sorted by name (the sort key)."""
        domains: list[Domain] = []
        start: dict[str, Any] | None = None
        while True:
            request: dict[str, Any] = {
                "TableName": self._table,
                "KeyConditionExpression": "pk = :p",
                "ExpressionAttributeValues": {":p": {"S": PARTITION}},
            }
            if start:
                request["ExclusiveStartKey"] = start
            with aws_errors("Query (domains)"):
                page = self._client.query(**request)
            domains += [read_record(Domain, item) for item in page.get("Items", [])]
            start = page.get("LastEvaluatedKey")
            if not start:
                return domains

    def create(self, domain: Domain) -> bool:
        """Offer ``domain`` as given unless it is offered already (then it is left as it is);
        True if it was new. For imports: running one again changes nothing."""
        item = record_item(domain, pk=PARTITION)
        with aws_errors("PutItem (domain)"):
            try:
                self._client.put_item(
                    TableName=self._table, Item=item, ConditionExpression="attribute_not_exists(pk)"
                )
            except ClientError as error:
                if error_code(error) == "ConditionalCheckFailedException":
                    return False
                raise
        return True

    def get(self, name: str) -> Domain | None:
        """One domain, or None."""
        with aws_errors("GetItem (domain)"):
            item = self._client.get_item(TableName=self._table, Key=_key(name)).get("Item")
        return read_record(Domain, item) if item else None

    def put(self, name: str, *, subdomains: bool, now: str) -> bool:
        """Offer ``name`` (or change whether it allows subdomains); True if it was new."""
        with aws_errors("UpdateItem (domain)"):
            result = self._client.update_item(
                TableName=self._table,
                Key=_key(name),
                UpdateExpression=(
                    "SET subdomains = :s, updatedAt = :now, createdAt = if_not_exists(createdAt, :now)"
                ),
                ExpressionAttributeValues={":s": {"BOOL": subdomains}, ":now": {"S": now}},
                ReturnValues="ALL_OLD",
            )
        return not result.get("Attributes")

    def delete(self, name: str) -> bool:
        """Stop offering ``name``; False if it was not offered."""
        with aws_errors("DeleteItem (domain)"):
            try:
                self._client.delete_item(
                    TableName=self._table, Key=_key(name), ConditionExpression="attribute_exists(pk)"
                )
            except ClientError as exc:
                if error_code(exc) == "ConditionalCheckFailedException":
                    return False
                raise
        return True
