"""The search index on LanceDB: one row per revision with its vector and searchable text, the store of record.
Both search legs run on an in-memory copy of the rows (resident.py: exact cosine and BM25), loaded from the
table on first use and following every write.

Derived from the graph (the source of truth) and rebuilt from it by ``kumiho-ce reindex``. Nothing outside
``appliance.search`` imports lancedb.
"""

from __future__ import annotations

import json
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import Any

import lancedb
import numpy as np
import pyarrow as pa
from lancedb.index import BTree

from appliance.core.search import TEXT_VERSION, SearchFilter
from appliance.errors import StorageError, Unavailable
from appliance.search.resident import ResidentTable

log = logging.getLogger(__name__)

TABLE = "revisions"
UNREADABLE = ("the search index cannot be read right now; the appliance is checking it and rebuilds it from the "
              "graph if it is damaged: try again shortly")


@dataclass(frozen=True)
class IndexRow:
    revision_kref: str
    item_kref: str
    project: str
    space: str
    spaces: list[str]
    kind: str
    memory_type: str
    tags: list[str]
    deprecated: bool
    created_at: str
    title: str
    text: str
    text_hash: str
    vector: np.ndarray


@dataclass(frozen=True)
class Hit:
    revision_kref: str
    raw: float  # cosine similarity (vector) or BM25 (text)
    vector: np.ndarray | None = None


def _schema(dim: int) -> pa.Schema:
    return pa.schema([
        ("revision_kref", pa.string()), ("item_kref", pa.string()), ("project", pa.string()),
        ("space", pa.string()), ("spaces", pa.list_(pa.string())), ("kind", pa.string()),
        ("memory_type", pa.string()), ("tags", pa.list_(pa.string())), ("deprecated", pa.bool_()),
        ("created_at", pa.string()), ("title", pa.string()), ("text", pa.string()), ("text_hash", pa.string()),
        ("vector", pa.list_(pa.float32(), dim)),
    ])


@dataclass(frozen=True)
class IndexCaches:
    """What LanceDB may keep: its own defaults are a 6 GiB index cache, a 1 GiB metadata cache and every table
    version for 7 days (a version per write: ~1,000 after 10,000 stores)."""

    index_cache_mb: int = 64
    metadata_cache_mb: int = 64
    keep_versions: timedelta = timedelta(minutes=1)


class SearchIndex:
    def __init__(self, path: Path, dim: int, model_id: str, caches: IndexCaches = IndexCaches()) -> None:
        path.mkdir(parents=True, exist_ok=True)
        self.path, self.dim, self.model_id = path, dim, model_id
        self._caches = caches
        self._keep_versions = caches.keep_versions
        session = lancedb.Session(index_cache_size_bytes=caches.index_cache_mb << 20,
                                  metadata_cache_size_bytes=caches.metadata_cache_mb << 20)
        self._db = lancedb.connect(str(path), session=session)
        self._meta_path = path / "index.json"
        self._lock = threading.Lock()  # LanceDB writes (and optimize) from one thread at a time
        if self._has_table() and not self._compatible():
            log.warning("search index was built with another embedding model or text version: dropping it for a "
                        "rebuild")
            self._db.drop_table(TABLE)
        if not self._has_table():
            self._db.create_table(TABLE, schema=_schema(dim))
            self._meta_path.unlink(missing_ok=True)
            self._write_meta(model_id=model_id, dim=dim, text_version=TEXT_VERSION)
        self._table = self._db.open_table(TABLE)
        self._drop_fts_index()
        self._keyed = any(i.index_type == "BTree" for i in self._table.list_indices())
        self._resident: ResidentTable | None = None  # loaded on first use (resident.py says why)
        self._resident_lock = threading.Lock()
        # krefs of rows ``show`` made searchable that the table does not hold yet (``persist`` appends them);
        # a row is shown before it is persisted, so the others are in the table
        self._unpersisted: set[str] = set()
        self._members = threading.Lock()  # the resident rows and ``_unpersisted`` change together
        self.on_unreadable: Callable[[], None] = lambda: None  # the index worker listens

    def _has_table(self) -> bool:
        return TABLE in (self._db.list_tables().tables or [])

    def _meta(self) -> dict[str, Any]:
        try:
            return dict(json.loads(self._meta_path.read_text()))
        except (OSError, ValueError):
            return {}

    def _write_meta(self, **values: Any) -> None:
        temp = self._meta_path.with_suffix(".tmp")
        temp.write_text(json.dumps({**self._meta(), **values}))
        temp.replace(self._meta_path)

    def _drop_fts_index(self) -> None:
        """Data directories written before full-text search moved into memory have a LanceDB FTS index that
        nothing reads; optimize() would keep updating it."""
        for config in self._table.list_indices():
            if config.index_type == "FTS":
                try:
                    self._table.drop_index(config.name)
                except Exception as exc:  # harmless: it only costs write time
                    log.warning("could not drop the unused full-text index %s: %s", config.name, exc)

    def _compatible(self) -> bool:
        meta = self._meta()
        return bool(meta.get("model_id") == self.model_id and meta.get("dim") == self.dim
                    and meta.get("text_version", 1) == TEXT_VERSION)

    # -- writes ---------------------------------------------------------------------------------------
    def upsert(self, rows: list[IndexRow]) -> None:
        """Make the rows searchable and write them to the table."""
        self.show(rows)
        self.persist(rows)

    def show(self, rows: list[IndexRow]) -> None:
        """Make the rows searchable now, in the resident copy only: ``persist`` writes them to the table later
        (the index worker, in the background). Until then a crash loses them from the index, not from the graph,
        whose outbox still lists their revisions (appliance/graph/outbox.py)."""
        if not rows:
            return
        resident = self.resident()
        with self._members:
            self._unpersisted.update(r.revision_kref for r in rows if r.revision_kref not in resident)
            resident.upsert([_as_record(r) for r in rows])

    def persist(self, rows: list[IndexRow]) -> None:
        """Write rows that ``show`` has made searchable to the table (one writer: the index worker)."""
        if not rows:
            return
        records = [_as_record(r) for r in rows]
        with self._members:
            # rows the table does not hold yet are appended: a merge scans the whole table (~100 ms at 10k
            # rows) while an append costs a few ms
            fresh = [r for r in records if r["revision_kref"] in self._unpersisted]
            known = [r for r in records if r["revision_kref"] not in self._unpersisted]
        with self._lock:
            try:
                if fresh:
                    self._table.add(pa.Table.from_pylist(fresh, schema=_schema(self.dim)))
                if known:
                    (self._table.merge_insert("revision_kref").when_matched_update_all()
                     .when_not_matched_insert_all().execute(pa.Table.from_pylist(known, schema=_schema(self.dim))))
            except Exception as exc:  # lance raises plain exceptions
                raise StorageError(f"search index write failed: {exc}") from exc
            with self._members:
                self._unpersisted.difference_update(r["revision_kref"] for r in fresh)
            if not self._keyed:
                # a B-tree on the key: merges, deletes and lookups by kref drop from ~100-170 ms to ~10-30 ms
                # at 10k rows (measured); rows added later are folded in by optimize()
                self._table.create_index("revision_kref", config=BTree(), replace=True)
                self._keyed = True

    def delete(self, revision_krefs: list[str]) -> None:
        for start in range(0, len(revision_krefs), 500):
            chunk = revision_krefs[start: start + 500]
            with self._lock:
                self._table.delete("revision_kref IN (" + ", ".join(_quote(k) for k in chunk) + ")")
                with self._members:
                    self._unpersisted.difference_update(chunk)
                    if self._resident is not None:
                        self._resident.delete(chunk)

    def fragmented(self, small: int = 32) -> bool:
        """Whether many small files have piled up (each write adds one): time to compact."""
        try:
            stats: Any = self._table.stats()  # a dict, although lancedb annotates a dataclass
        except Exception:  # statistics are an optimisation hint only
            return True
        return int(stats.get("fragment_stats", {}).get("num_small_fragments", 0)) > small

    def optimize(self) -> None:
        """Compact the table's files and delete old versions (run when the writer is idle)."""
        with self._lock:
            self._table.optimize(cleanup_older_than=self._keep_versions)

    # -- reads ----------------------------------------------------------------------------------------
    def count(self) -> int:
        return int(self._table.count_rows())

    def count_if_readable(self) -> int | None:
        """The rows, or None when the table cannot be read: a damaged table, which the index worker repairs
        (its state and last error say so). Status reports use it: they answer whatever the index's state."""
        try:
            return self.count()
        except Exception:
            return None

    def revision_krefs(self) -> set[str]:
        count = self.count()
        if not count:
            return set()
        table = self._table.search().select(["revision_kref"]).limit(count).to_arrow()
        return set(table.column("revision_kref").to_pylist())

    def text_hashes(self, revision_krefs: list[str]) -> dict[str, tuple[str, np.ndarray]]:
        """Existing rows' text hash and vector, so that an unchanged text is not embedded again."""
        resident = self.resident()
        with self._members:  # new revisions have no row to read
            revision_krefs = [k for k in revision_krefs if k in resident and k not in self._unpersisted]
        if not revision_krefs:
            return {}
        found = (self._table.search().where("revision_kref IN (" + ", ".join(map(_quote, revision_krefs)) + ")")
                 .select(["revision_kref", "text_hash", "vector"]).limit(len(revision_krefs)).to_list())
        return {r["revision_kref"]: (r["text_hash"], np.asarray(r["vector"], dtype=np.float32)) for r in found}

    def vector_search(self, vector: np.ndarray, where: SearchFilter, limit: int) -> list[Hit]:
        """Exact cosine search over the resident copy of the vectors."""
        return [Hit(kref, cosine) for kref, cosine in self.resident().search(vector, where, limit)]

    def text_search(self, text: str, where: SearchFilter, limit: int, with_vectors: bool = False,
                    fuzzy: bool = False) -> list[Hit]:
        """BM25 hits over the resident term index; ``fuzzy`` matches each query word within a few edits
        (typo tolerance), ``with_vectors`` returns each hit's stored vector too (hybrid search scores text
        hits by meaning without another query)."""
        return [Hit(kref, bm25, vector)
                for kref, bm25, vector in self.resident().text_search(text, where, limit, fuzzy, with_vectors)]

    def current_of(self, item_krefs: list[str]) -> dict[str, tuple[str, tuple[str, ...]]]:
        """Item kref → (revision kref, tags) of the revision a recall shows, as the resident rows know it
        (ResidentTable.current_of)."""
        return self.resident().current_of(item_krefs)

    def resident(self) -> ResidentTable:
        """The in-memory copy of the rows, loaded from the table on first use. A table that cannot be read
        answers ``Unavailable`` and calls ``on_unreadable`` (the index worker checks it and, if it is damaged,
        rebuilds it from the graph)."""
        with self._resident_lock:
            if self._resident is None:
                with self._lock:  # no write lands between reading the table and following its writes
                    resident = ResidentTable(self.dim)
                    try:
                        count = self.count()
                        if count:
                            columns = ["revision_kref", "project", "space", "kind", "memory_type", "tags",
                                       "deprecated", "text", "vector"]
                            resident.load(self._table.search().select(columns).limit(count).to_arrow())
                    except Exception as exc:  # lance raises plain exceptions
                        log.error("the search index cannot be read: %s", exc)
                        self.on_unreadable()
                        raise Unavailable(UNREADABLE) from None
                    self._resident = resident
            return self._resident

    def start_over(self) -> None:
        """An empty table in place of the current one, whose directory the caller has moved aside (a damaged
        index, appliance/search/repair.py); the rows come back from the graph."""
        fresh = SearchIndex(self.path, self.dim, self.model_id, self._caches)
        with self._resident_lock, self._lock:
            self._db, self._table, self._keyed = fresh._db, fresh._table, fresh._keyed
            with self._members:
                self._resident = ResidentTable(self.dim)
                self._unpersisted.clear()


def _as_record(row: IndexRow) -> dict[str, Any]:
    record = row.__dict__.copy()
    record["vector"] = row.vector.astype(np.float32).tolist()
    return record


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"
