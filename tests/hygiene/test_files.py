"""A purged entry's full text goes with it: hygiene deletes the artifact files of every revision it purges, so
nothing of the entry stays in ``artifacts/`` (or in ``artifacts/.orphaned``, where a start moves files that no
entry points to, and which every backup copies)."""

from __future__ import annotations

from pathlib import Path

from tests.hygiene.entries import Clock, appliance, hygiene_over


def files_holding(root: Path, text: str) -> list[Path]:
    return [path for path in root.rglob("*") if path.is_file() and text in path.read_text(errors="replace")]


def test_a_purged_entrys_files_are_gone_after_the_pass_and_after_a_restart(tmp_path: Path) -> None:
    data = tmp_path / "data"
    artifacts = data / "artifacts"
    with appliance(data) as services:
        api = services.memory_api
        api.store(key="chat turn", content="we spoke about the wombat heist", category="conversation")
        api.store(key="chat turn", content="and then about the wombat getaway", category="conversation")
        api.store(key="kept", content="the capybara stays", category="core")
        assert len(files_holding(artifacts, "wombat")) == 2, "each revision's text is in an artifact file"
        clock = Clock()
        clock.advance(days=31)
        result = hygiene_over(services, clock, conversation_retention_days=30).run()
        assert result["purged"] == 1
        assert files_holding(artifacts, "wombat") == []
        assert files_holding(artifacts, "capybara"), "a kept entry keeps its file"
    with appliance(data):  # a start sweeps files no entry points to into artifacts/.orphaned
        assert files_holding(artifacts, "wombat") == []
        assert files_holding(artifacts, "capybara")
