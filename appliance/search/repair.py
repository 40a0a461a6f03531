"""A damaged search index: found, moved aside, rebuilt from the graph.

The index (``<data dir>/index``) is derived from the graph, so damage never costs a memory: a table that
cannot be opened or read is renamed to ``<data dir>/index.damaged-<UTC time>`` (kept for the operator,
never deleted here), an empty one takes its place, and every revision is queued for indexing again (the
outbox of appliance/graph/outbox.py; the index worker refills the table in the background).

``check`` reads what a damaged copy breaks, cheaply (tens of milliseconds at 10k rows on the 2-core machine,
benchmarks/index_repair_bench.py): the latest manifest (opening the table), every older one (compaction's
cleanup reads them), every data file (the key column of every row) and the key index (one lookup). It does
not verify the bytes inside the data files: LanceDB keeps no checksums.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal

import lancedb

from appliance.graph import GraphStore
from appliance.search.index import TABLE, SearchIndex

log = logging.getLogger(__name__)

_SOURCE_LOCATION = re.compile(r",\s*/\S+\.rs:\d+:\d+")  # lance appends the Rust file and line to its errors


@dataclass(frozen=True)
class Health:
    state: Literal["ok", "missing", "damaged"]
    detail: str  # in words, for the log, doctor and reindex
    rows: int = 0
    revision_krefs: frozenset[str] = frozenset()  # whose rows the table holds (doctor compares them with the graph)

    @property
    def damaged(self) -> bool:
        return self.state == "damaged"


def check(path: Path) -> Health:
    """Whether the index at ``path`` can be opened and read; changes nothing."""
    if path.exists() and not path.is_dir():
        return Health("damaged", f"{path} is a file, not a directory")
    if not (path / f"{TABLE}.lance").exists():
        return Health("missing", f"no search index at {path} yet: it is built from the graph")
    try:
        table = lancedb.connect(str(path)).open_table(TABLE)  # reads the latest manifest
        table.list_versions()  # reads every manifest
        rows = int(table.count_rows())
        krefs = table.search().select(["revision_kref"]).limit(rows).to_arrow() if rows else None  # every data file
        if any(i.index_type == "BTree" for i in table.list_indices()):
            table.search().where("revision_kref = ''").select(["revision_kref"]).limit(1).to_arrow()
    except Exception as exc:  # lance raises plain RuntimeErrors (and OSErrors) for every kind of damage
        return Health("damaged", describe(exc))
    held = frozenset(krefs.column("revision_kref").to_pylist()) if krefs is not None else frozenset()
    return Health("ok", f"{rows} rows, every file readable", rows, held)


def describe(exc: BaseException) -> str:
    """A lance error in words, without the Rust source locations it carries."""
    text = _SOURCE_LOCATION.sub("", str(exc)).strip()
    return text.removeprefix("lance error: ") or type(exc).__name__


def move_aside(path: Path, now: datetime | None = None) -> Path:
    """Rename the index directory to ``index.damaged-<UTC time>`` beside it and return the new path."""
    stamp = (now or datetime.now(UTC)).strftime("%Y%m%dT%H%M%SZ")
    aside = path.with_name(f"{path.name}.damaged-{stamp}")
    n = 1
    while aside.exists():  # two repairs within a second
        n += 1
        aside = path.with_name(f"{path.name}.damaged-{stamp}-{n}")
    path.rename(aside)
    return aside


def damaged_copies(path: Path) -> list[Path]:
    """Copies moved aside by earlier repairs, oldest first."""
    return sorted(path.parent.glob(f"{path.name}.damaged-*"))


@dataclass(frozen=True)
class MovedAside:
    problem: str  # what was wrong with it
    aside: Path  # where the damaged copy now is


def set_aside_if_damaged(path: Path) -> MovedAside | None:
    """Before the index is opened (start, ``kumiho-ce reindex``): move a damaged one out of the way, so that
    an empty one is created in its place (and ``IndexSync.repair`` requeues every revision)."""
    health = check(path)
    if not health.damaged:
        return None
    return _moved(health.detail, move_aside(path))


def replace_damaged(index: SearchIndex, graph: GraphStore, problem: str) -> MovedAside:
    """The open index was found damaged (the index worker, while the appliance runs): move it aside, go on
    with an empty one and queue every revision for indexing again."""
    aside = move_aside(index.path)
    index.start_over()
    graph.mark_all_unindexed()
    return _moved(problem, aside)


def _moved(problem: str, aside: Path) -> MovedAside:
    log.warning("the search index was damaged (%s): moved it aside to %s (keep it for a bug report or delete "
                "it) and rebuilding the index from the graph", problem, aside)
    return MovedAside(problem, aside)
