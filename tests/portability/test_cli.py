"""``kumiho-ce export`` and ``kumiho-ce import`` as real processes: with no appliance running (the command
opens the data directory itself) and with one running (over HTTP, the file staged in imports/)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from appliance.graph import GraphStore
from tests.appliance_process import cli_env, kumiho_ce, serve
from tests.portability.graphs import populate
from tests.portability.test_roundtrip import comparable


@pytest.fixture(scope="module")
def source(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A stopped appliance's data directory holding the graph fixture."""
    data = tmp_path_factory.mktemp("cli-source") / "data"
    (data / "graph").mkdir(parents=True)
    with GraphStore.open(data / "graph" / "graph.kuzu") as graph:
        graph.ensure_project("CognitiveMemory")  # as an appliance's first start does
        populate(graph, data / "artifacts")
    return data


def test_export_and_import_without_a_running_appliance(source: Path, tmp_path: Path) -> None:
    exported = tmp_path / "home.jsonl"
    done = kumiho_ce("export", str(exported), env=cli_env(source), timeout=120)
    assert done.returncode == 0, done.stderr
    lines = exported.read_text().splitlines()
    assert f"exported {len(lines) - 2} records to {exported}" in done.stderr
    assert not list(tmp_path.glob(".*.part")), "no partial file is left beside the export"

    target = tmp_path / "target"
    dry = kumiho_ce("import", "--dry-run", "--json", str(exported), env=cli_env(target), timeout=120)
    assert dry.returncode == 0, dry.stderr
    assert json.loads(dry.stdout)["dry_run"] is True
    done = kumiho_ce("import", str(exported), env=cli_env(target), timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"{len(lines) - 2} records checked; wrote" in done.stdout
    again = kumiho_ce("import", str(exported), env=cli_env(target), timeout=120)
    assert again.returncode == 0 and "wrote nothing" in again.stdout, again.stdout + again.stderr
    assert not list((target / "imports").glob("*")), "the staged copy is removed"

    copy = tmp_path / "copy.jsonl"
    assert kumiho_ce("export", str(copy), env=cli_env(target), timeout=120).returncode == 0
    assert comparable(copy.read_text(), target) == comparable(exported.read_text(), source)


def test_export_and_import_through_a_running_appliance(source: Path, tmp_path: Path) -> None:
    exported = tmp_path / "home.jsonl"
    assert kumiho_ce("export", "--project", "Alpha", str(exported), env=cli_env(source), timeout=120).returncode == 0
    target = tmp_path / "target"
    with serve(target) as running:
        try:
            done = kumiho_ce("import", str(exported), env=cli_env(target), timeout=120)
            assert done.returncode == 0, done.stderr
            assert "records checked; wrote" in done.stdout
            copy = tmp_path / "copy.jsonl"
            done = kumiho_ce("export", "--project", "Alpha", str(copy), env=cli_env(target), timeout=120)
            assert done.returncode == 0, done.stderr
            assert comparable(copy.read_text(), target, seq=False) == comparable(exported.read_text(), source,
                                                                                  seq=False)
            missing = kumiho_ce("export", "--project", "Nope", str(tmp_path / "no.jsonl"), env=cli_env(target))
            assert missing.returncode == 2 and "project 'Nope' does not exist" in missing.stderr
            assert not (tmp_path / "no.jsonl").exists()

            broken = tmp_path / "broken.jsonl"
            broken.write_text(exported.read_text().replace('"kind":"note"', '"kind":"no te"', 1))
            refused = kumiho_ce("import", str(broken), env=cli_env(target), timeout=120)
            assert refused.returncode == 2, refused.stdout
            assert "field kind: kind 'no te' may hold only" in refused.stderr and "Traceback" not in refused.stderr
        finally:
            running.stop()
