"""Every use of moto's internal state in the repository, in one place, checked against the pinned moto.

moto's public surface is ``mock_aws``, ``ThreadedMotoServer`` and the AWS APIs it answers; its docs
show its backends only as an "internal API" with no promise of shape. Each function here names the
internals it relies on and why no public API does it; nothing else in tools/, tests/ or bench/
imports from moto beyond ``mock_aws``, and tests/tools/unit/test_moto_internals.py fails if the
pinned moto changes any of them. That moto is patched at install (patches/, applied by the
Makefile; tests/tools/unit/test_moto_patches.py); no module here changes how moto works. moto is
imported late: its server stack takes seconds to import.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass
from typing import Any

from werkzeug.serving import WSGIRequestHandler

WsgiApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


def server_app() -> tuple[WsgiApp, type[WSGIRequestHandler]]:
    """moto's server: its WSGI app (every service, dispatched by host and path) and the werkzeug
    request handler it serves that app with, here without a console line per AWS call (errors are
    still logged).

    Relies on ``moto.moto_server.werkzeug_app``: ``DomainDispatcherApplication`` (whose
    ``get_backend_for_host`` is remembered per host), ``create_backend_app`` and
    ``MotoRequestHandler``. The public ``ThreadedMotoServer`` builds
    the app inside its serving thread, so our middleware could only be put in front afterwards
    (moto serving unguarded meanwhile) through its private ``_server``, and its ``stop()`` leaves
    the port bound.
    """
    from moto.moto_server.werkzeug_app import (
        DomainDispatcherApplication,
        MotoRequestHandler,
        create_backend_app,
    )

    class QuietRequestHandler(MotoRequestHandler):
        def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
            return None

    class RememberingDispatcher(DomainDispatcherApplication):
        # moto names a request's service by listing its package directory (an isdir per module)
        # and matching URL patterns, for every request; the answer depends on the host alone.
        def __init__(self, create_app: Any) -> None:
            super().__init__(create_app)
            self._backends: dict[str | None, Any] = {}

        def get_backend_for_host(self, host: str | None) -> Any:
            if host in self._backends:
                return self._backends[host]
            backend = super().get_backend_for_host(host)
            if len(self._backends) < 1000:  # a bound, should requests name hosts without end
                self._backends[host] = backend
            return backend

    return RememberingDispatcher(create_backend_app), QuietRequestHandler


def forget_model_instances() -> None:
    """Empty moto's record of every model object it has created (kept for its server's dashboard).

    Relies on ``moto.core.model_instances.reset_model_data``, which clears each model class's
    ``instances_tracked`` and touches no backend state. moto keeps every model object it ever
    creates, its TransactWriteItems rollback copies of whole tables included, so a long-running
    emulator grows without end; moto offers no setting to stop recording and no public reset short
    of its ``/moto-api/reset``, which drops every table too.
    """
    from moto.core.model_instances import reset_model_data

    reset_model_data()


def tracked_model_instances() -> int:
    """How many model objects moto's record (emptied by :func:`forget_model_instances`) holds.

    Relies on ``moto.core.model_instances.model_data`` (model classes by service and name) and each
    class's ``instances_tracked`` list; moto shows them only through its server's dashboard.
    """
    from moto.core.model_instances import model_data

    return sum(
        len(getattr(model, "instances_tracked", ()))
        for kind in model_data.values()
        for model in kind.values()
    )


def trim_stream(stream_arn: str, before: int, kept_iterators: int) -> int:
    """Drop the records of ``stream_arn`` below sequence number ``before`` from moto's memory, as
    DynamoDB trims a stream, then every shard iterator no longer usable and all but the newest
    ``kept_iterators``; returns how many records were dropped.

    Relies on ``moto.dynamodb.models.dynamodb_backends`` (a table's ``stream_shard``, its ``items``
    list and ``starting_sequence_number``) and ``moto.dynamodbstreams.models.
    dynamodbstreams_backends`` (``shard_iterators``, each with its ``stream_shard`` and
    ``sequence_number``). moto keeps every stream record and shard iterator forever (DynamoDB
    drops records after 24 hours and iterators after 15 minutes) and offers no way to drop them.

    Sequence numbers stay right: moto numbers a new record ``len(items) +
    starting_sequence_number`` and finds sequence number n at ``items[n -
    starting_sequence_number]``, so the start moves up by what is dropped. Reading below the new
    start is refused, as DynamoDB refuses a trimmed position.

    Raises ``ValueError`` for a malformed ARN, ``LookupError`` for a table or region moto lacks.
    """
    from moto.dynamodb.models import dynamodb_backends
    from moto.dynamodbstreams.models import dynamodbstreams_backends

    # arn:aws:dynamodb:<region>:<account>:table/<name>/stream/<label>
    _, _, _, region, account, resource = stream_arn.split(":", 5)
    table = dynamodb_backends[account][region].tables.get(resource.split("/")[1])
    if table is None:
        raise LookupError(f"no table for {stream_arn}")
    shard = table.stream_shard
    if shard is None:
        return 0
    count = max(0, min(before - shard.starting_sequence_number, len(shard.items)))
    del shard.items[:count]
    shard.starting_sequence_number += count
    iterators = dynamodbstreams_backends[account][region].shard_iterators
    stale = [
        key
        for key, it in iterators.items()
        if it.stream_shard is shard and it.sequence_number < shard.starting_sequence_number
    ]
    stale += list(iterators)[: max(0, len(iterators) - kept_iterators)]  # the oldest
    for key in stale:
        iterators.pop(key, None)
    return count


def empty_tables(region: str, names: Iterable[str]) -> None:
    """Drop every item and stream record of the tables ``names`` of moto's default account in
    ``region``, keeping the tables.

    Relies on ``moto.dynamodb.models.dynamodb_backends`` (a backend's ``tables``, each table's
    ``items`` and ``stream_shard.items``). Deleting through the API costs a call per item and
    leaves a REMOVE record per item in the stream, which moto deep-copies on every
    TransactWriteItems (its rollback copy); DeleteTable and CreateTable cost more still.
    """
    from moto.core.models import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends

    tables = dynamodb_backends[DEFAULT_ACCOUNT_ID][region].tables
    for name in names:
        table = tables[name]
        table.items.clear()
        if table.stream_shard is not None:
            table.stream_shard.items.clear()


def table_names(region: str) -> set[str]:
    """The names of the tables of moto's default account in ``region``.

    Relies on ``moto.dynamodb.models.dynamodb_backends`` (a backend's ``tables``). ListTables
    answers the same through the API, at the cost of a request: asked before every integration
    test, to see whether a test's own fresh moto wiped the backends.
    """
    from moto.core.models import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends

    return set(dynamodb_backends[DEFAULT_ACCOUNT_ID][region].tables)


def empty_queues(region: str, urls: Iterable[str]) -> None:
    """Drop every message of the queues at ``urls`` (of moto's default account in ``region``),
    in flight or not, keeping the queues.

    Relies on ``moto.sqs.models.sqs_backends`` (a backend's ``get_queue`` and ``purge_queue``, a
    queue's ``last_purged_at``). The API's PurgeQueue is allowed once a minute per queue (moto keeps
    that rule), and receiving and deleting costs two requests a queue even when it is empty, and
    cannot reach a message received but not deleted until its visibility timeout ends.
    """
    from moto.core.models import DEFAULT_ACCOUNT_ID
    from moto.sqs.models import sqs_backends

    backend = sqs_backends[DEFAULT_ACCOUNT_ID][region]
    for url in urls:
        name = url.rstrip("/").rsplit("/", 1)[-1]
        backend.get_queue(name).last_purged_at = None  # the once-a-minute rule is for real queues
        backend.purge_queue(name)


@dataclass(frozen=True)
class TablesSnapshot:
    """The items of some tables of moto's default account in one region, as they were (see
    :func:`snapshot_tables`)."""

    region: str
    items: dict[str, Any]  # table name -> a deep copy of moto's ``Table.items``


def snapshot_tables(region: str, names: Iterable[str]) -> TablesSnapshot:
    """Copy the items of the tables ``names`` of moto's default account in ``region``, for
    :func:`restore_tables` to put back, any number of times.

    Relies on ``moto.dynamodb.models.dynamodb_backends`` (a backend's ``tables``, each table's
    ``items``: hash key to item, or to a dict of range key to item), which moto itself deep-copies
    to roll a transaction back. Through the API a restore costs a Scan per table, a delete per item
    written since and a put per item changed; and DynamoDB has no snapshot short of a backup.
    """
    import copy

    from moto.core.models import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends

    tables = dynamodb_backends[DEFAULT_ACCOUNT_ID][region].tables
    return TablesSnapshot(region, {name: copy.deepcopy(tables[name].items) for name in names})


def restore_tables(snapshot: TablesSnapshot) -> None:
    """Put the items of each table in ``snapshot`` back as they were when it was taken: items
    written since are gone, items changed or deleted since are back. The streams are left alone:
    the restore is no write a stream reader would see, and the sequence numbers go on rising.

    Relies on what :func:`snapshot_tables` relies on, and on each table's ``attribute_index``
    (patches/moto-dynamodb-scale.patch: the items an index query looks at, kept by moto's own
    writes), emptied so the next index query builds it again from the items put back.
    """
    import copy

    from moto.core.models import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends

    tables = dynamodb_backends[DEFAULT_ACCOUNT_ID][snapshot.region].tables
    for name, items in snapshot.items.items():
        table = tables[name]
        table.items.clear()
        table.items.update(copy.deepcopy(items))  # a copy: the snapshot serves the next restore too
        table.attribute_index.clear()  # it may no longer name items put back


def tables_hold(snapshot: TablesSnapshot) -> bool:
    """Whether the tables of ``snapshot`` hold exactly its items now, every attribute of every
    item alike (compared as DynamoDB's JSON answers them): whether what ran since left them as
    they were when it was taken.

    Relies on what :func:`snapshot_tables` relies on, and on each item's ``to_json``, which moto
    answers reads with. Through the API it would cost a Scan of each table, answered as JSON and
    parsed.
    """
    from moto.core.models import DEFAULT_ACCOUNT_ID
    from moto.dynamodb.models import dynamodb_backends

    tables = dynamodb_backends[DEFAULT_ACCOUNT_ID][snapshot.region].tables
    return all(_wire(tables[name].items) == _wire(items) for name, items in snapshot.items.items())


def _wire(items: dict[Any, Any]) -> dict[Any, Any]:
    """A table's ``items`` (hash key to item, or to a dict of range key to item) as the JSON of each
    item, by key."""
    flat: dict[Any, Any] = {}
    for hash_key, held in items.items():
        for range_key, item in held.items() if isinstance(held, dict) else [(None, held)]:
            flat[hash_key, range_key] = item.to_json()
    return flat


def stop_stream_records(keep: Collection[str] = ()) -> None:
    """Make every table moto holds, but those named in ``keep``, record no stream from now on.

    Relies on ``moto.dynamodb.models.dynamodb_backends`` (each table's ``stream_shard``, which moto
    appends a record to on each write when set). UpdateTable can turn a stream off, but a table's
    stream settings are what the code under measure is provisioned with. moto keeps every stream
    record in its table object and deep-copies each table a TransactWriteItems touches, records
    included, once per item of the transaction: left on, every request makes every later
    transaction slower.
    """
    from moto.dynamodb.models import dynamodb_backends

    for regions in list(dynamodb_backends.values()):
        for backend in list(regions.values()):
            for table in backend.tables.values():
                if table.stream_shard is not None and table.name not in keep:
                    table.stream_shard = None


def pin_kms_key_id(account_id: str, region: str, key_id: str, wanted: str) -> None:
    """Give the KMS key moto just created as ``key_id`` the id ``wanted`` (its ARN follows).

    Relies on ``moto.kms.models.kms_backends`` (a backend's ``keys`` by id, each key's ``id`` and
    ``arn``). AWS and moto draw a key's id at random and no API chooses it; the local stack names
    the template's keys by ids fixed from their logical ids (``nimbus_tools.template.local_key_id``),
    so the functions' environment and the IAM statements can name a key before it is created. Call
    it right after CreateKey, before the key is used or given an alias or tags.
    """
    from moto.kms.models import kms_backends

    backend = kms_backends[account_id][region]
    key = backend.keys.pop(key_id)
    key.id = wanted
    key.arn = f"{key.arn.rsplit('/', 1)[0]}/{wanted}"
    backend.keys[wanted] = key
