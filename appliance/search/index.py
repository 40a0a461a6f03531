"""The search index on LanceDB: one row per revision with its vector and searchable text (the store of
record and the full-text engine; vector queries run on an in-memory copy, see vectors.py).

Derived from the graph (the source of truth) and rebuilt from it by ``kumiho-ce reindex``. Nothing outside
``appliance.search`` imports lancedb.
"""

from __future__ import annotations

import json
import logging
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import lancedb
import numpy as np
import pyarrow as pa
from lancedb.index import FTS
from lancedb.query import FullTextQuery

from appliance.core.search import SearchFilter
from appliance.errors import StorageError
from appliance.search.vectors import VectorMatrix

log = logging.getLogger(__name__)

TABLE = "revisions"


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


class SearchIndex:
    def __init__(self, path: Path, dim: int, model_id: str) -> None:
        path.mkdir(parents=True, exist_ok=True)
        self.path, self.dim, self.model_id = path, dim, model_id
        self._db = lancedb.connect(str(path))
        self._meta_path = path / "index.json"
        self._lock = threading.Lock()  # LanceDB writes (and optimize) from one thread at a time
        self._fts_ready = False
        if self._has_table() and not self._compatible():
            log.warning("search index was built with another embedding model: dropping it for a rebuild")
            self._db.drop_table(TABLE)
        if not self._has_table():
            self._db.create_table(TABLE, schema=_schema(dim))
            self._meta_path.unlink(missing_ok=True)
            self._write_meta(model_id=model_id, dim=dim)
        self._table = self._db.open_table(TABLE)
        self._fts_ready = any(i.index_type == "FTS" for i in self._table.list_indices())
        self._matrix: VectorMatrix | None = None  # loaded on first use (vectors.py says why)
        self._matrix_lock = threading.Lock()

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

    def _compatible(self) -> bool:
        meta = self._meta()
        return bool(meta.get("model_id") == self.model_id and meta.get("dim") == self.dim)

    # -- writes ---------------------------------------------------------------------------------------
    def upsert(self, rows: list[IndexRow]) -> None:
        if not rows:
            return
        records = [_as_record(r) for r in rows]
        data = pa.Table.from_pylist(records, schema=_schema(self.dim))
        with self._lock:
            try:
                (self._table.merge_insert("revision_kref").when_matched_update_all()
                 .when_not_matched_insert_all().execute(data))
            except Exception as exc:  # lance raises plain exceptions
                raise StorageError(f"search index write failed: {exc}") from exc
            if self._matrix is not None:
                self._matrix.upsert(records)
        self._ensure_indices()

    def delete(self, revision_krefs: list[str]) -> None:
        for start in range(0, len(revision_krefs), 500):
            chunk = revision_krefs[start: start + 500]
            with self._lock:
                self._table.delete("revision_kref IN (" + ", ".join(_quote(k) for k in chunk) + ")")
                if self._matrix is not None:
                    self._matrix.delete(chunk)

    def _ensure_indices(self) -> None:
        if not self._fts_ready:
            with self._lock:
                self._table.create_index("text", config=FTS(with_position=False), replace=True)
                self._fts_ready = True

    def optimize(self) -> None:
        """Fold new rows into the indices and compact files (run when the writer is idle)."""
        with self._lock:
            self._table.optimize()

    # -- reads ----------------------------------------------------------------------------------------
    def count(self) -> int:
        return int(self._table.count_rows())

    def revision_krefs(self) -> set[str]:
        count = self.count()
        if not count:
            return set()
        table = self._table.search().select(["revision_kref"]).limit(count).to_arrow()
        return set(table.column("revision_kref").to_pylist())

    def text_hashes(self, revision_krefs: list[str]) -> dict[str, tuple[str, np.ndarray]]:
        """Existing rows' text hash and vector, so that an unchanged text is not embedded again."""
        if not revision_krefs:
            return {}
        found = (self._table.search().where("revision_kref IN (" + ", ".join(map(_quote, revision_krefs)) + ")")
                 .select(["revision_kref", "text_hash", "vector"]).limit(len(revision_krefs)).to_list())
        return {r["revision_kref"]: (r["text_hash"], np.asarray(r["vector"], dtype=np.float32)) for r in found}

    def vector_search(self, vector: np.ndarray, where: SearchFilter, limit: int) -> list[Hit]:
        """Exact cosine search over the in-memory copy of the vectors (loaded from the table once)."""
        return [Hit(kref, cosine) for kref, cosine in self._vectors().search(vector, where, limit)]

    def _vectors(self) -> VectorMatrix:
        with self._matrix_lock:
            if self._matrix is None:
                with self._lock:  # no write lands between reading the table and following its writes
                    matrix = VectorMatrix(self.dim)
                    count = self.count()
                    if count:
                        columns = ["revision_kref", "project", "space", "kind", "memory_type", "tags",
                                   "deprecated", "vector"]
                        matrix.upsert(self._table.search().select(columns).limit(count).to_arrow().to_pylist())
                    self._matrix = matrix
            return self._matrix

    def text_search(self, text: str | FullTextQuery, where: SearchFilter, limit: int,
                    with_vectors: bool = False) -> list[Hit]:
        """BM25 hits for a plain string or a structured (e.g. fuzzy) full-text query; ``with_vectors``
        returns each hit's stored vector too (hybrid search scores text hits by meaning without another
        query)."""
        if not self._fts_ready or (isinstance(text, str) and not text.strip()):
            return []
        query = (self._table.search(text, query_type="fts", fts_columns="text") if isinstance(text, str)
                 else self._table.search(text, query_type="fts"))
        clause = to_sql(where)
        if clause:
            query = query.where(clause, prefilter=True)
        columns = ["revision_kref", "_score", *(["vector"] if with_vectors else [])]
        found = query.select(columns).limit(limit).to_list()
        return [Hit(r["revision_kref"], float(r["_score"]),
                    np.asarray(r["vector"], dtype=np.float32) if with_vectors else None) for r in found]


def _as_record(row: IndexRow) -> dict[str, Any]:
    record = row.__dict__.copy()
    record["vector"] = row.vector.astype(np.float32).tolist()
    return record


def _quote(value: str) -> str:
    return "'" + value.replace("'", "''") + "'"


def _any_of(column: str, values: tuple[str, ...]) -> str:
    return f"{column} IN (" + ", ".join(map(_quote, values)) + ")"


def to_sql(where: SearchFilter) -> str:
    """The filter as a LanceDB (DataFusion SQL) predicate; values are quoted, never interpolated raw."""
    clauses = []
    if not where.include_deprecated:
        clauses.append("deprecated = false")
    if where.project:
        clauses.append(f"project = {_quote(where.project)}")
    if where.spaces:
        clauses.append("(" + " OR ".join(f"array_has(spaces, {_quote(s)})" for s in where.spaces) + ")")
    if where.kinds:
        clauses.append(_any_of("kind", where.kinds))
    if where.memory_types:
        clauses.append(_any_of("memory_type", where.memory_types))
    if where.tags:
        clauses.append("(" + " OR ".join(f"array_has(tags, {_quote(t)})" for t in where.tags) + ")")
    return " AND ".join(clauses)
