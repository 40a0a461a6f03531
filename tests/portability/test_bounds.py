"""The bounds of one line and of a carried file (too large to build through the API in a test: the bound is
lowered here, the code path is the one real files take)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from appliance.errors import InvalidArgument
from appliance.graph import GraphStore
from appliance.portability import exporter, importer, records
from tests.portability.graphs import populate


@pytest.fixture
def exported(tmp_path: Path) -> tuple[Path, Path]:
    root = tmp_path / "source"
    with GraphStore.open(root / "graph.kuzu") as graph:
        populate(graph, root / "artifacts")
        path = tmp_path / "export.jsonl"
        path.write_text("".join(exporter.export_lines(graph, root / "artifacts")))
    return root, path


def test_a_line_longer_than_the_bound_is_refused(exported: tuple[Path, Path], tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    _, path = exported
    lines = path.read_text().splitlines()
    longest = max(range(1, len(lines) - 1), key=lambda i: len(lines[i]))
    monkeypatch.setattr(records, "MAX_LINE_BYTES", len(lines[longest]) - 1)
    with GraphStore.open(tmp_path / "target" / "graph.kuzu") as graph:
        stats = graph.stats()
        with pytest.raises(InvalidArgument, match=rf"line {longest + 1}: longer than \d+ bytes"):
            importer.Importer(graph, tmp_path / "target" / "artifacts").run(path)
        assert graph.stats() == stats


def test_a_file_above_the_inline_bound_is_described_not_carried(exported: tuple[Path, Path], tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    root, _ = exported
    monkeypatch.setattr(records, "MAX_INLINE_FILE_BYTES", 8)
    with GraphStore.open(root / "graph.kuzu") as graph:
        text = "".join(exporter.export_lines(graph, root / "artifacts"))
    artifact = next(json.loads(line) for line in text.splitlines() if '"type":"artifact"' in line
                    and '"file"' in line)
    assert "content_base64" not in artifact["file"] and "larger than 8 bytes" in artifact["file"]["omitted"]
    path = tmp_path / "big.jsonl"
    path.write_text(text)
    with GraphStore.open(tmp_path / "target" / "graph.kuzu") as graph:
        result = importer.Importer(graph, tmp_path / "target" / "artifacts").run(path)
        assert result["artifact_files_not_carried"] == 1 and result["artifact_files_written"] == 0
        kept = graph.get_artifact(artifact["kref"])
        assert kept.location == str((tmp_path / "target" / "artifacts").resolve() / artifact["file"]["path"])


def test_a_carried_file_whose_bytes_do_not_match_is_refused(exported: tuple[Path, Path], tmp_path: Path) -> None:
    _, path = exported
    text = path.read_text()
    lines = text.splitlines()
    index = next(i for i, line in enumerate(lines) if '"content_base64"' in line)
    record = json.loads(lines[index])
    record["file"]["sha256"] = "0" * 64
    lines[index] = json.dumps(record)
    path.write_text("\n".join(lines) + "\n")
    with GraphStore.open(tmp_path / "target" / "graph.kuzu") as graph, pytest.raises(
            InvalidArgument, match=rf"line {index + 1}, field file.content_base64: the bytes do not match"):
        importer.Importer(graph, tmp_path / "target" / "artifacts").run(path)


def test_events_after_a_gap_in_the_sequence_are_exported(exported: tuple[Path, Path]) -> None:
    """Events pruned by retention leave a gap in their sequence numbers larger than a page."""
    root, _ = exported
    with GraphStore.open(root / "graph.kuzu") as graph:
        engine = graph._engine  # test setup: events a retention pass removed (no public call deletes events)
        engine.write(lambda tx: tx.run("UNWIND range(1, 2500) AS n CREATE (:Event {at: '2026-01-01T00:00:00+00:00', "
                                       "routing_key: 'test.pruned', kref: '', author: 'local', details: '{}'})"))
        engine.write(lambda tx: tx.run("MATCH (e:Event) WHERE e.seq >= 5 DELETE e"))
        graph.create_project("Later")
        events = [json.loads(line) for line in exporter.export_lines(graph, root / "artifacts")
                  if '"type":"event"' in line]
    assert [e["seq"] for e in events][:5] == [0, 1, 2, 3, 4]
    assert events[-1]["routing_key"] == "project.created" and events[-1]["kref"] == "kref://Later"
    assert events[-1]["seq"] > 2500
