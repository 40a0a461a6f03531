"""Schema migrations, recorded in the database itself (table ``SchemaMigration``).

Each migration runs in its own write transaction together with its record, so a crash leaves either the
old or the new schema. A data directory written by a newer version is refused with a clear message.
From version 2 on, every migration ships with a fixture data directory of the previous version and a test
that upgrades it (``tests/graph/test_migrations.py`` checks that this holds).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from appliance.errors import DataDirError
from appliance.graph.engine import KuzuEngine, Tx

_TEXT_STAMPS = "created_at STRING, modified_at STRING, author STRING, username STRING"


@dataclass(frozen=True)
class Migration:
    version: int
    name: str
    statements: tuple[str, ...]


MIGRATIONS: tuple[Migration, ...] = (
    Migration(
        1,
        "the Kumiho data model: projects, spaces, items, revisions, tags, artifacts, bundles, edges, events",
        (
            "CREATE NODE TABLE Project(name STRING PRIMARY KEY, project_id STRING, description STRING, "
            "created_at STRING, updated_at STRING, deprecated BOOLEAN, allow_public BOOLEAN, metadata STRING)",
            # path "/P" is a project's root space; "/P/a/b" nested ones
            f"CREATE NODE TABLE Space(path STRING PRIMARY KEY, name STRING, project STRING, parent STRING, "
            f"{_TEXT_STAMPS}, metadata STRING)",
            # id = the item kref without its scheme: "P/a/b/name.kind"
            f"CREATE NODE TABLE Item(id STRING PRIMARY KEY, project STRING, space STRING, name STRING, "
            f"kind STRING, {_TEXT_STAMPS}, metadata STRING, deprecated BOOLEAN, next_number INT64)",
            # indexed = the search-index outbox marker: false until the search index holds this revision
            f"CREATE NODE TABLE Revision(id STRING PRIMARY KEY, item STRING, number INT64, metadata STRING, "
            f"{_TEXT_STAMPS}, deprecated BOOLEAN, default_artifact STRING, indexed BOOLEAN)",
            f"CREATE NODE TABLE Artifact(id STRING PRIMARY KEY, revision STRING, name STRING, "
            f"location STRING, {_TEXT_STAMPS}, metadata STRING, deprecated BOOLEAN)",
            "CREATE NODE TABLE Event(seq SERIAL PRIMARY KEY, at STRING, routing_key STRING, kref STRING, "
            "author STRING, details STRING)",
            "CREATE REL TABLE SUBSPACE(FROM Space TO Space)",
            "CREATE REL TABLE HOLDS(FROM Space TO Item)",
            "CREATE REL TABLE HAS_REVISION(FROM Item TO Revision)",
            "CREATE REL TABLE HAS_ARTIFACT(FROM Revision TO Artifact)",
            "CREATE REL TABLE LINK(FROM Revision TO Revision, edge_type STRING, metadata STRING, "
            "created_at STRING, author STRING, username STRING)",
            # a tag held by a revision over [since, until); until = '' while it still holds it
            "CREATE REL TABLE TAGGED(FROM Item TO Revision, tag STRING, since STRING, until STRING)",
            # bundle → member over bundle revisions [added_in, removed_in); removed_in = 0 while a member
            "CREATE REL TABLE COLLECTS(FROM Item TO Item, added_at STRING, added_by STRING, "
            "added_by_username STRING, added_in INT64, removed_in INT64, metadata STRING)",
        ),
    ),
    Migration(
        2,
        "the audit trail: one row per committed write transaction (appliance/graph/write_policy.py)",
        (
            # events [first_event, last_event] are the transaction's; changes = JSON [[routing_key, kref], …]
            "CREATE NODE TABLE Audit(seq SERIAL PRIMARY KEY, at STRING, door STRING, client STRING, "
            "operation STRING, first_event INT64, last_event INT64, events INT64, changes STRING)",
        ),
    ),
)

LATEST_VERSION = MIGRATIONS[-1].version
# called before the first migration of a graph that already holds a schema: (engine, found, newest). It takes
# the snapshot of the data directory that a failed or unwanted upgrade is recovered from; when it raises, nothing
# is migrated.
BeforeMigration = Callable[[KuzuEngine, int, int], object]


def current_version(tx: Tx) -> int:
    tables = {row[0] for row in tx.rows("CALL show_tables() RETURN name")}
    if "SchemaMigration" not in tables:
        return 0
    return int(tx.scalar("MATCH (m:SchemaMigration) RETURN coalesce(max(m.version), 0)") or 0)


def read_version(path: Path) -> int:
    """The schema version of the graph at ``path``, read without changing anything (for doctor)."""
    engine = KuzuEngine(path, buffer_pool_mb=64, readers=1, read_only=True)
    try:
        return engine.read(current_version)
    finally:
        engine.close()


def migrate(engine: KuzuEngine, migrations: tuple[Migration, ...] = MIGRATIONS,
            before: BeforeMigration | None = None) -> list[int]:
    """Bring the database to the newest schema; return the versions applied now. ``before`` runs first when a
    graph of an older schema is migrated (not when a new graph is created)."""
    engine.write(
        lambda tx: tx.run(
            "CREATE NODE TABLE IF NOT EXISTS SchemaMigration(version INT64 PRIMARY KEY, name STRING, "
            "applied_at STRING)"
        )
    )
    found = engine.read(current_version)
    newest = migrations[-1].version
    if found > newest:
        raise DataDirError(
            f"the graph in {engine.path} has schema version {found}, newer than this kumiho-ce knows "
            f"({newest}); upgrade kumiho-ce or restore a backup made by this version"
        )
    if before is not None and 0 < found < newest:
        before(engine, found, newest)
    applied = []
    for migration in migrations:
        if migration.version > found:
            engine.write(functools.partial(_apply, migration=migration))
            applied.append(migration.version)
    return applied


def _apply(tx: Tx, migration: Migration) -> None:
    for statement in migration.statements:
        tx.run(statement)
    tx.run(
        "CREATE (:SchemaMigration {version: $v, name: $n, applied_at: $at})",
        {"v": migration.version, "n": migration.name, "at": datetime.now(UTC).isoformat()},
    )
