"""Schema migrations are recorded in the database and upgrade existing data directories in place.

Rule: from schema version 2 on, every migration N ships ``tests/fixtures/schema_v{N-1}.tar.xz`` (made by
``tests/fixtures/make_fixture.py`` before the migration lands) and is exercised by
``test_every_fixture_upgrades_to_the_current_schema`` below.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from appliance.errors import DataDirError
from appliance.graph import GraphStore, schema
from appliance.graph.engine import KuzuEngine
from tests.fixtures.make_fixture import unpack

FIXTURES = Path(__file__).parent.parent / "fixtures"


def test_a_new_database_records_every_migration(tmp_path: Path) -> None:
    with GraphStore.open(tmp_path / "g.kuzu", buffer_pool_mb=64) as store:
        assert store.schema_version() == schema.LATEST_VERSION
        recorded = store._engine.read(lambda tx: tx.rows(
            "MATCH (m:SchemaMigration) RETURN m.version, m.name ORDER BY m.version"))
    assert [v for v, _ in recorded] == [m.version for m in schema.MIGRATIONS]
    assert all(name for _, name in recorded)


def test_reopening_applies_nothing_and_keeps_data(tmp_path: Path) -> None:
    path = tmp_path / "g.kuzu"
    with GraphStore.open(path, buffer_pool_mb=64) as store:
        store.create_project("Kept")
    engine = KuzuEngine(path, buffer_pool_mb=64)
    try:
        assert schema.migrate(engine) == []
    finally:
        engine.close()
    with GraphStore.open(path, buffer_pool_mb=64) as store:
        assert store.get_project("Kept").name == "Kept"


def test_a_later_migration_upgrades_an_existing_database_in_place(tmp_path: Path) -> None:
    path = tmp_path / "g.kuzu"
    with GraphStore.open(path, buffer_pool_mb=64) as store:
        store.create_project("Kept")
    extra = schema.Migration(schema.LATEST_VERSION + 1, "add a column",
                             ("ALTER TABLE Project ADD color STRING DEFAULT 'blue'",))
    engine = KuzuEngine(path, buffer_pool_mb=64)
    try:
        assert schema.migrate(engine, (*schema.MIGRATIONS, extra)) == [extra.version]
        assert engine.read(lambda tx: tx.scalar("MATCH (p:Project {name: 'Kept'}) RETURN p.color")) == "blue"
        assert engine.read(schema.current_version) == extra.version
    finally:
        engine.close()


def test_a_database_from_a_newer_version_is_refused(tmp_path: Path) -> None:
    path = tmp_path / "g.kuzu"
    GraphStore.open(path, buffer_pool_mb=64).close()
    engine = KuzuEngine(path, buffer_pool_mb=64)
    engine.write(lambda tx: tx.run("CREATE (:SchemaMigration {version: 99, name: 'future', applied_at: ''})"))
    engine.close()
    with pytest.raises(DataDirError, match="schema version 99, newer than this kumiho-ce"):
        GraphStore.open(path, buffer_pool_mb=64)
    assert schema.read_version(path) == 99


def test_a_failed_migration_leaves_the_previous_schema(tmp_path: Path) -> None:
    path = tmp_path / "g.kuzu"
    GraphStore.open(path, buffer_pool_mb=64).close()
    broken = schema.Migration(schema.LATEST_VERSION + 1, "broken",
                              ("ALTER TABLE Project ADD ok STRING", "THIS IS NOT CYPHER"))
    engine = KuzuEngine(path, buffer_pool_mb=64)
    try:
        with pytest.raises(Exception, match="refused"):
            schema.migrate(engine, (*schema.MIGRATIONS, broken))
        assert engine.read(schema.current_version) == schema.LATEST_VERSION
        columns = {r[1] for r in engine.read(lambda tx: tx.rows("CALL table_info('Project') RETURN *"))}
        assert "ok" not in columns
    finally:
        engine.close()


def test_every_migration_after_the_first_ships_a_fixture_of_the_version_before() -> None:
    for migration in schema.MIGRATIONS[1:]:
        assert (FIXTURES / f"schema_v{migration.version - 1}.tar.xz").is_file(), (
            f"migration {migration.version} needs tests/fixtures/schema_v{migration.version - 1}.tar.xz")
    assert (FIXTURES / f"schema_v{schema.LATEST_VERSION}.tar.xz").is_file(), (
        "keep a fixture of the current schema so that the next migration can be tested against it")


@pytest.mark.parametrize("fixture", sorted(FIXTURES.glob("schema_v*.tar.xz")), ids=lambda p: p.name)
def test_every_fixture_upgrades_to_the_current_schema(fixture: Path, tmp_path: Path) -> None:
    path = unpack(fixture, tmp_path)
    with GraphStore.open(path, buffer_pool_mb=64) as store:
        assert store.schema_version() == schema.LATEST_VERSION
        item = "kref://CognitiveMemory/personal/coffee-a1b2c3d4.conversation"
        assert store.revision_by_tag(item).metadata["title"] == "Alice prefers tea now"
        assert store.get_artifact(item + "?r=2").location == "/tmp/chat.json"
        assert [e.edge_type for e in store.get_edges(item + "?r=2", direction="outgoing").items] == ["SUPERSEDES"]
        members, _ = store.bundle_members("kref://CognitiveMemory/personal/drinks.bundle")
        assert [m.item_kref for m in members] == [item]
        store.create_revision(item)  # and it takes new writes
