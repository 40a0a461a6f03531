"""A file that cannot be imported is refused whole, before anything is written, with the line and the field:
bad JSON, an unknown record type, an over-long field, a bad kref, an unknown format version, a file cut short,
an unknown field, a reference to nothing, a record twice."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from appliance.portability import records
from tests.inprocess import InProcess, serve_in_process
from tests.portability.graphs import populate
from tests.portability.test_roundtrip import export, upload


@pytest.fixture(scope="module")
def good(tmp_path_factory: pytest.TempPathFactory) -> str:
    with serve_in_process(tmp_path_factory.mktemp("good") / "data", None) as app:
        populate(app.services.graph, app.services.data_dir.root / "artifacts")
        return export(app)


@pytest.fixture(scope="module")
def target(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcess]:
    with serve_in_process(tmp_path_factory.mktemp("target") / "data", None) as app:
        yield app


def _line_of(lines: list[str], kind: str, containing: str = "") -> int:
    """The index of the first line of ``kind`` (containing ``containing``)."""
    return next(i for i, line in enumerate(lines) if f'"type":"{kind}"' in line and containing in line)


def _edit(kind: str, change: Callable[[dict[str, Any]], None], containing: str = "") -> Callable[[list[str]], int]:
    def edit(lines: list[str]) -> int:
        index = _line_of(lines, kind, containing)
        record = json.loads(lines[index])
        change(record)
        lines[index] = json.dumps(record)
        return index + 1
    return edit


def _replace(kind: str, text: str, containing: str = "") -> Callable[[list[str]], int]:
    def edit(lines: list[str]) -> int:
        index = _line_of(lines, kind, containing)
        lines[index] = text
        return index + 1
    return edit


def _header_version(lines: list[str]) -> int:
    header = json.loads(lines[0])
    header["version"] = 2
    lines[0] = json.dumps(header)
    return 1


def _not_an_export(lines: list[str]) -> int:
    lines[0] = json.dumps({"name": "something else"})
    return 1


def _drop_space(lines: list[str]) -> int:
    index = _line_of(lines, "space", '"path":"/Alpha/notes"')
    del lines[index]
    lines[-1] = records.encode({"type": "end", "records": len(lines) - 2}).rstrip("\n")
    return _line_of(lines, "space", '"path":"/Alpha/notes/deep"') + 1


def _duplicate(lines: list[str]) -> int:
    index = _line_of(lines, "item")
    lines.insert(index + 1, lines[index])
    lines[-1] = records.encode({"type": "end", "records": len(lines) - 2}).rstrip("\n")
    return index + 2


def _cut_at_a_line(lines: list[str]) -> int:
    del lines[-3:]
    return len(lines) + 1


CASES: dict[str, tuple[Callable[[list[str]], int], str | None, str]] = {
    # name: (edit returning the line number the error must name, the field it must name, words of the message)
    "bad JSON": (_replace("item", '{"type": "item", "kref": '), None, "not valid JSON"),
    "wrong type": (_edit("space", lambda r: r.update(type="spaceship")), "type", "unknown record type"),
    "over-long field": (_edit("item", lambda r: r.update(author="a" * 5000)), "author", "longer than 4096"),
    "bad kref": (_edit("revision", lambda r: r.update(kref="kref://Alpha/notes/pl an.note?r=1")), "kref",
                 "item name"),
    "kref and fields disagree": (_edit("item", lambda r: r.update(item_name="other")), "item_name",
                                 "does not match the kref"),
    "unknown field": (_edit("item", lambda r: r.update(colour="red")), "colour", "not a field of a item record"),
    "metadata not strings": (_edit("item", lambda r: r["metadata"].update(n=3)), "metadata.n",
                             "metadata values are strings"),
    "unknown format version": (_header_version, "version", "format version 2 is not one this appliance reads"),
    "not an export": (_not_an_export, "format", "not a kumiho-ce export"),
    "a reference to nothing": (_drop_space, "parent_path", "/Alpha/notes is neither in the file above this line"),
    "a record twice": (_duplicate, None, "appears twice in the file"),
    "cut at a line end": (_cut_at_a_line, None, "ends without its closing"),
}


@pytest.mark.parametrize("case", list(CASES))
def test_a_malformed_file_is_refused_naming_the_line_and_field_and_nothing_is_written(
        case: str, good: str, target: InProcess) -> None:
    edit, field, words = CASES[case]
    lines = good.splitlines()
    line = edit(lines)
    stats = target.services.graph.stats()
    job = upload(target, "\n".join(lines) + "\n")
    assert job["state"] == "failed" and job["error"]["code"] == "invalid_argument", job
    message = job["error"]["message"]
    where = f"line {line}" + (f", field {field}" if field else "")
    assert where + ":" in message and words in message, message
    assert "nothing was written" in message and "Traceback" not in message
    assert target.services.graph.stats() == stats
    assert not list((target.services.data_dir.root / "imports").glob("*")), "the upload is removed"


def test_a_file_cut_in_the_middle_of_a_line_is_refused(good: str, target: InProcess) -> None:
    cut = good[: len(good) // 2]
    line = cut.count("\n") + 1
    stats = target.services.graph.stats()
    job = upload(target, cut)
    assert job["state"] == "failed", job
    assert f"line {line}: the file ends in the middle of this line" in job["error"]["message"], job
    assert target.services.graph.stats() == stats
