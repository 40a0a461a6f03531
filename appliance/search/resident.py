"""Every index row in memory — its vector, filter columns and a BM25 term index over its text — so that both
search legs take a few milliseconds.

LanceDB stays the store of record; this table is derived from it (bulk-loaded on first use) and follows every
upsert and delete. Measured on the 2-core reference machine: LanceDB's vector path cost 10–25 ms per query
and its full-text search 14–26 ms at 10k rows, ~50 ms at 100k; here an exact matrix product takes ~1 ms per
10k rows and BM25 over the postings of the query's terms a few ms at 100k.

Rows own *slots*: every per-row array below is indexed by slot. A deleted row's slot stays, dead, until the
next load. The text index:

* postings in CSR form (``_offsets`` by term id → ``_slots``, ``_tf``, ``_versions``), built in bulk, plus
  a small delta per term (Python lists) for upserts, folded into the CSR when it grows;
* a posting counts only while its slot is alive and its version is the slot's current one: a changed text
  bumps the version (its old postings go stale), a delete clears ``alive``; folding drops both kinds;
* BM25 (k1 1.2, b 0.75, idf ln(1 + (N − df + 0.5)/(df + 0.5))), like LanceDB's, so raw scores keep the scale
  that ``appliance.core.scoring.text_score`` was calibrated on; N, df and the average length are counted over
  the searched project's live rows (over all live rows for a search across projects), so that one project's
  documents never move another project's scores.

The vector leg scores rows exactly (float32) below ``QUANTIZED_FROM`` rows to scan; from there it scans the
rows' 8-bit codes (scan.py) and rescores the best ``SHORTLIST`` exactly, so the cosines it returns are the
float32 ones (only which rows make the shortlist is approximate; recall@10 against the exact scan is reported
by benchmarks/search_bench.py).

Memory: 1.5 KiB per row for the vector (384 float32s), 0.4 KiB for its 8-bit codes, plus ~0.2 KiB for
postings, columns and the vocabulary; see benchmarks/search_bench.py (``resident_mb``).
"""

from __future__ import annotations

import itertools
import math
import threading
from collections import Counter
from collections.abc import Iterable
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from rapidfuzz import process
from rapidfuzz.distance import Levenshtein
from threadpoolctl import threadpool_limits

from appliance.core.search import SearchFilter
from appliance.search import analysis, scan

K1, B = 1.2, 0.75
MAX_EXPANSIONS = 50  # vocabulary terms one fuzzy query word may stand for (LanceDB's default too)
MAX_QUERY_WORDS = 32  # fuzzy matching looks at this many distinct query words
FOLD_AT = 20_000  # delta postings (at least, or an eighth of the CSR) before they are folded into it
_FIRST, _GROW = 1024, 1.5
# From this many rows to score, the vector leg scans 8-bit codes (scan.py: a quarter of the bytes) and rescores
# the best SHORTLIST of them exactly in float32; below it the float32 product takes a few ms and stays exact.
# SHORTLIST 512 kept recall@10 against the exact scan at ≥ 0.99 on MiniLM vectors (benchmarks/search_bench.py).
QUANTIZED_FROM = 20_000
SHORTLIST = 512

# One BLAS thread for the whole process: the products here are memory-bound, and OpenBLAS's pool (2 threads on
# the 2-core machine) made them 1.5–3× slower whenever the other core was busy (the query embedding, another
# request); a 5k-row product went from ~0.5 to 6 ms.
threadpool_limits(1, user_api="blas")

_BETWEEN, _BOUNDARY = "Q", -2  # separates rows in a bulk regex pass: no lower-cased text holds an upper-case Q
TextHit = tuple[str, float, np.ndarray | None]  # revision kref, BM25, its stored vector when asked for


class _Codes:
    """Strings ↔ small integers, so that filters are vector comparisons."""

    def __init__(self) -> None:
        self.ids: dict[str, int] = {}
        self.names: list[str] = []

    def code(self, value: str) -> int:
        if value not in self.ids:
            self.ids[value] = len(self.names)
            self.names.append(value)
        return self.ids[value]

    def allowed(self, values: Iterable[str]) -> list[int]:
        return [self.ids[v] for v in values if v in self.ids]


class _WordIds(dict[str, int]):
    """Lower-cased word → term id (−1: a stop word, not indexed); a miss analyses the word and registers its
    term. Indexing maps every word through this dict, so each distinct word is analysed once."""

    def __init__(self, vocabulary: _Vocabulary) -> None:
        super().__init__()
        self._vocabulary = vocabulary

    def __missing__(self, word: str) -> int:
        found = analysis.term(word)
        tid = -1 if found is None else self._vocabulary.id(found)
        self[word] = tid
        return tid


class _Vocabulary:
    """Terms ↔ ids (append-only), and each term's character bigrams for fuzzy lookups: a word within k edits
    of a term shares all but at most 2k of its distinct bigrams (an edit touches two), so counting shared
    bigrams leaves a few candidates to verify instead of the whole vocabulary (~50 ms at 100k terms)."""

    def __init__(self) -> None:
        self.terms: list[str] = []
        self.ids: dict[str, int] = {}
        self.words = _WordIds(self)
        # bigram → ids of the terms [0, _covered) that hold it, as CSR over the sorted bigram keys; later
        # terms are scanned directly until the next refresh
        self._covered = 0
        self._keys = np.zeros(0, dtype=np.int64)
        self._offsets = np.zeros(1, dtype=np.int64)
        self._by_gram = np.zeros(0, dtype=np.int32)
        self._lengths = np.zeros(0, dtype=np.int32)

    def id(self, term: str) -> int:
        tid = self.ids.get(term)
        if tid is None:
            tid = self.ids[term] = len(self.terms)
            self.terms.append(term)
        return tid

    def refresh(self) -> None:
        """Rebuild the bigram index once new terms are many (writers call this; ~50 ms per 100k terms)."""
        if len(self.terms) - self._covered <= max(2048, self._covered // 8):
            return
        lengths = np.fromiter(map(len, self.terms), dtype=np.int64, count=len(self.terms))
        codes = np.frombuffer("".join(f"{_START}{t}{_END}" for t in self.terms).encode("utf-32-le"),
                            dtype=np.uint32).astype(np.int64)
        keys = (codes[:-1] << 21) | codes[1:]
        owner = np.repeat(np.arange(len(self.terms), dtype=np.int64), lengths + 2)[:-1]
        inside = codes[:-1] != ord(_END)  # not a pair across two terms
        keys, owner = keys[inside], owner[inside]
        order = np.lexsort((owner, keys))
        keys, owner = keys[order], owner[order]
        first = np.ones(len(keys), dtype=bool)  # each term once per bigram
        first[1:] = (keys[1:] != keys[:-1]) | (owner[1:] != owner[:-1])
        keys, owner = keys[first], owner[first]
        self._keys, starts = np.unique(keys, return_index=True)
        self._offsets = np.append(starts, len(keys)).astype(np.int64)
        self._by_gram = owner.astype(np.int32)
        self._lengths = lengths.astype(np.int32)
        self._covered = len(self.terms)

    def near(self, term: str, edits: int, limit: int) -> list[int]:
        """Ids of the (at most ``limit``) terms within ``edits`` Levenshtein edits of ``term``, nearest first."""
        keys = _bigram_keys(term)
        needed = len(keys) - 2 * edits
        if needed > 0:
            at = np.searchsorted(self._keys, keys)
            parts = [self._by_gram[self._offsets[i]: self._offsets[i + 1]]
                     for i, key in zip(at.tolist(), keys.tolist(), strict=True)
                     if i < len(self._keys) and self._keys[i] == key]
            shared = np.bincount(np.concatenate(parts), minlength=self._covered) if parts else \
                np.zeros(self._covered, dtype=np.int64)
            found = np.flatnonzero(shared >= needed)
        else:
            found = np.arange(self._covered)
        found = found[np.abs(self._lengths[found] - len(term)) <= edits]
        candidates = found.tolist() + [t for t in range(self._covered, len(self.terms))
                                       if abs(len(self.terms[t]) - len(term)) <= edits]
        near = process.extract(term, [self.terms[t] for t in candidates], scorer=Levenshtein.distance,
                               score_cutoff=edits, limit=limit)
        return [candidates[at] for _, _, at in near]


_START, _END = "\x02", "\x03"  # pad terms so that their first and last letters make bigrams too


def _bigram_keys(term: str) -> np.ndarray:
    """The distinct bigrams of the padded term as integers (two 21-bit code points)."""
    codes = [ord(c) for c in f"{_START}{term}{_END}"]
    return np.unique(np.array([(a << 21) | b for a, b in itertools.pairwise(codes)], dtype=np.int64))


def _item_of(revision_kref: str) -> str:
    return revision_kref.rsplit("?r=", 1)[0]


def _number_of(revision_kref: str) -> int:
    try:
        return int(revision_kref.rsplit("?r=", 1)[1])
    except (IndexError, ValueError):
        return -1


def _grown(values: np.ndarray, size: int) -> np.ndarray:
    bigger = np.zeros((size, *values.shape[1:]), dtype=values.dtype)
    bigger[: len(values)] = values
    return bigger


class ResidentTable:
    def __init__(self, dim: int) -> None:
        self.dim = dim
        self._lock = threading.Lock()
        self._krefs: list[str] = []
        self._position: dict[str, int] = {}
        self._vectors = np.zeros((_FIRST, dim), dtype=np.float32)
        self._codes8 = np.zeros((_FIRST, dim), dtype=np.uint8)  # the vectors as 8-bit codes (scan.py)
        self._scales = np.zeros(_FIRST, dtype=np.float32)
        self._alive = np.zeros(_FIRST, dtype=bool)
        self._deprecated = np.zeros(_FIRST, dtype=bool)
        self._columns = {name: np.zeros(_FIRST, dtype=np.int32) for name in ("project", "space", "kind", "type")}
        self._codes = {name: _Codes() for name in self._columns}
        self._tags: dict[str, set[int]] = {}
        self._row_tags: list[tuple[str, ...]] = []
        self._by_item: dict[str, set[int]] = {}  # item kref → its live rows (recall's current revision: current_of)
        # the text index
        self._text_hash = np.zeros(_FIRST, dtype=np.int64)  # hash() of the indexed text, to skip unchanged ones
        self._version = np.zeros(_FIRST, dtype=np.uint32)  # 0: no text indexed yet
        self._length = np.zeros(_FIRST, dtype=np.float32)  # terms in the row's text (BM25's document length)
        self._vocabulary = _Vocabulary()
        self._offsets = np.zeros(1, dtype=np.int64)
        self._slots = np.zeros(0, dtype=np.int32)
        self._tf = np.zeros(0, dtype=np.float32)
        self._versions = np.zeros(0, dtype=np.uint32)
        self._delta: dict[int, tuple[list[int], list[int], list[int]]] = {}  # term id → slots, tfs, versions
        self._delta_size = 0

    def __len__(self) -> int:
        return len(self._position)

    def __contains__(self, revision_kref: object) -> bool:
        return revision_kref in self._position

    def krefs(self) -> list[str]:
        with self._lock:
            return list(self._position)

    def current_of(self, item_krefs: Iterable[str]) -> dict[str, tuple[str, tuple[str, ...]]]:
        """Item kref → (revision kref, tags) of the revision a recall shows: the live row tagged ``published``
        with the highest number, else the one tagged ``latest`` with the highest number. A stacked write shows
        its new row before the background sync moves the old row's ``latest``, so two rows may say ``latest``
        for a moment: the highest number is the right one. Items with no such row are left out."""
        chosen: dict[str, tuple[str, tuple[str, ...]]] = {}
        with self._lock:
            for item in item_krefs:
                best: tuple[int, int, int] | None = None  # (published?, number, slot)
                for at in self._by_item.get(item, ()):
                    tags = self._row_tags[at]
                    rank = 1 if "published" in tags else 0 if "latest" in tags else -1
                    if rank < 0:
                        continue
                    key = (rank, _number_of(self._krefs[at]), at)
                    if best is None or key > best:
                        best = key
                if best is not None:
                    chosen[item] = (self._krefs[best[2]], self._row_tags[best[2]])
        return chosen

    # -- writes ---------------------------------------------------------------------------------------
    def load(self, table: pa.Table) -> None:
        """Bulk-add the store's rows (the columns of ``upsert``, as Arrow): columns are coded and the postings
        built with numpy, so 100k rows load in seconds."""
        count = table.num_rows
        if not count:
            return
        krefs = table.column("revision_kref").to_pylist()
        with self._lock:
            if self._krefs or len(set(krefs)) != count:  # not the first load, or repeated krefs
                self._upsert(table.to_pylist())
                return
            self._ensure_capacity(count)
            self._krefs = krefs
            self._position = dict(zip(krefs, range(count), strict=True))
            for at, kref in enumerate(krefs):
                self._by_item.setdefault(_item_of(kref), set()).add(at)
            self._alive[:count] = True
            self._deprecated[:count] = pc.fill_null(table.column("deprecated"), False).to_numpy()
            for column, name in (("project", "project"), ("space", "space"), ("kind", "kind"),
                                 ("type", "memory_type")):
                encoded = pc.dictionary_encode(pc.fill_null(table.column(name), "")).combine_chunks()
                codes = [self._codes[column].code(v) for v in encoded.dictionary.to_pylist()]
                self._columns[column][:count] = np.asarray(codes, dtype=np.int32)[encoded.indices.to_numpy()]
            self._row_tags = [tuple(tags) if tags else () for tags in table.column("tags").to_pylist()]
            for at, tags in enumerate(self._row_tags):
                for tag in tags:
                    self._tags.setdefault(tag, set()).add(at)
            start = 0
            for chunk in table.column("vector").chunks:  # one copy, from Arrow's buffers into ours
                self._vectors[start: start + len(chunk)] = chunk.flatten().to_numpy().reshape(-1, self.dim)
                start += len(chunk)
            for first in range(0, count, 8192):  # in pieces: quantizing makes a temporary copy
                last = min(count, first + 8192)
                self._codes8[first:last], self._scales[first:last] = scan.quantize(self._vectors[first:last])
            if "text" in table.column_names:
                self._index_bulk(np.arange(count), [t or "" for t in table.column("text").to_pylist()])
            self._vocabulary.refresh()

    def upsert(self, rows: Iterable[dict[str, Any]]) -> None:
        """Rows as records with the index's columns (``vector`` as a sequence of floats; without ``text`` a
        row keeps the text it had)."""
        with self._lock:
            self._upsert(rows)

    def _upsert(self, rows: Iterable[dict[str, Any]]) -> None:
        placed = []
        for row in rows:
            at = self._place(row)
            placed.append(at)
            self._vectors[at] = np.asarray(row["vector"], dtype=np.float32)
            if "text" in row:
                self._index_text(at, row["text"] or "")
        if placed:  # the 8-bit codes of the rows written, at once
            self._codes8[placed], self._scales[placed] = scan.quantize(self._vectors[placed])
        if self._delta_size > max(FOLD_AT, len(self._slots) // 8):
            self._fold()
        self._vocabulary.refresh()

    def delete(self, revision_krefs: Iterable[str]) -> None:
        with self._lock:
            for kref in revision_krefs:
                at = self._position.pop(kref, None)
                if at is not None:  # the slot stays, dead, until the next load; its postings no longer count
                    self._alive[at] = False
                    self._by_item.get(_item_of(kref), set()).discard(at)
                    for tag in self._row_tags[at]:
                        self._tags[tag].discard(at)

    def _place(self, row: dict[str, Any]) -> int:
        """The row's slot (a new one for a new kref) with its filter columns set."""
        at = self._position.get(row["revision_kref"])
        if at is None:
            at = len(self._krefs)
            self._ensure_capacity(at + 1)
            self._krefs.append(row["revision_kref"])
            self._row_tags.append(())
            self._position[row["revision_kref"]] = at
        self._by_item.setdefault(_item_of(row["revision_kref"]), set()).add(at)
        self._alive[at] = True
        self._deprecated[at] = bool(row["deprecated"])
        for column, value in (("project", row["project"]), ("space", row["space"]),
                              ("kind", row["kind"]), ("type", row["memory_type"])):
            self._columns[column][at] = self._codes[column].code(value)
        for tag in self._row_tags[at]:
            self._tags[tag].discard(at)
        self._row_tags[at] = tuple(row["tags"] or ())
        for tag in self._row_tags[at]:
            self._tags.setdefault(tag, set()).add(at)
        return at

    def _ensure_capacity(self, size: int) -> None:
        if size <= len(self._alive):
            return
        grown = max(size, int(len(self._alive) * _GROW))
        self._vectors = _grown(self._vectors, grown)
        self._codes8 = _grown(self._codes8, grown)
        self._scales = _grown(self._scales, grown)
        self._alive = _grown(self._alive, grown)
        self._deprecated = _grown(self._deprecated, grown)
        self._columns = {name: _grown(values, grown) for name, values in self._columns.items()}
        self._text_hash = _grown(self._text_hash, grown)
        self._version = _grown(self._version, grown)
        self._length = _grown(self._length, grown)

    def _index_text(self, at: int, text: str) -> None:
        """One row's text into the delta; its earlier postings go stale (a text that did not change stays)."""
        digest = hash(text)
        if self._version[at] and self._text_hash[at] == digest:
            return
        ids = [t for t in map(self._vocabulary.words.__getitem__, analysis.words(text)) if t >= 0]
        self._version[at] += 1
        version = int(self._version[at])
        self._text_hash[at] = digest
        self._length[at] = len(ids)
        counts = Counter(ids)
        for tid, tf in counts.items():
            entry = self._delta.get(tid)
            if entry is None:
                entry = self._delta[tid] = ([], [], [])
            entry[0].append(at)
            entry[1].append(tf)
            entry[2].append(version)
        self._delta_size += len(counts)

    def _index_bulk(self, slots: np.ndarray, texts: list[str]) -> None:
        """Many rows' texts (on slots that have none yet) at once: (term, slot) pairs counted by one sort."""
        words = self._vocabulary.words
        words[_BETWEEN] = _BOUNDARY
        ids, owners = [], []
        for start in range(0, len(texts), 4096):  # one regex pass per chunk; the sentinel word separates rows
            chunk = texts[start: start + 4096]
            found = analysis.WORD.findall(f" {_BETWEEN} ".join(t.lower() for t in chunk))
            chunk_ids = np.fromiter(map(words.__getitem__, found), dtype=np.int64, count=len(found))
            owners.append(slots[start: start + len(chunk)][np.cumsum(chunk_ids == _BOUNDARY)])
            ids.append(chunk_ids)
        tid, owner = np.concatenate(ids), np.concatenate(owners)
        kept = tid >= 0
        tid, owner = tid[kept], owner[kept]
        capacity = len(self._alive)
        self._length[slots] = np.bincount(owner, minlength=capacity)[slots]
        self._version[slots] += 1
        self._text_hash[slots] = np.fromiter(map(hash, texts), dtype=np.int64, count=len(texts))
        pairs, tf = np.unique(tid * capacity + owner, return_counts=True)
        owner = pairs % capacity
        self._fold((pairs // capacity, owner, tf.astype(np.float32), self._version[owner]))

    def _fold(self, extra: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray] | None = None) -> None:
        """CSR + delta (+ ``extra`` postings) → a new CSR without stale or dead postings."""
        terms: list[np.ndarray] = [np.repeat(np.arange(len(self._offsets) - 1, dtype=np.int64),
                                             np.diff(self._offsets))]
        slots: list[np.ndarray] = [self._slots.astype(np.int64)]
        tfs: list[np.ndarray] = [self._tf]
        versions: list[np.ndarray] = [self._versions]
        if self._delta:
            tids = list(self._delta)
            entries = [self._delta[t] for t in tids]
            terms.append(np.repeat(np.asarray(tids, dtype=np.int64), [len(e[0]) for e in entries]))
            for at, values in ((0, slots), (1, tfs), (2, versions)):
                values.append(np.fromiter(itertools.chain.from_iterable(e[at] for e in entries),
                                          dtype=values[0].dtype))
        if extra is not None:
            for values, more in zip((terms, slots, tfs, versions), extra, strict=True):
                values.append(more.astype(values[0].dtype, copy=False))
        term = np.concatenate(terms)
        slot = np.concatenate(slots)
        tf = np.concatenate(tfs)
        version = np.concatenate(versions)
        valid = self._alive[slot] & (version == self._version[slot])
        term, slot, tf, version = term[valid], slot[valid], tf[valid], version[valid]
        order = np.lexsort((slot, term))
        self._slots = slot[order].astype(np.int32)
        self._tf = tf[order]
        self._versions = version[order]
        self._offsets = np.zeros(len(self._vocabulary.terms) + 1, dtype=np.int64)
        np.cumsum(np.bincount(term, minlength=len(self._vocabulary.terms)), out=self._offsets[1:])
        self._delta.clear()
        self._delta_size = 0

    # -- reads ----------------------------------------------------------------------------------------
    def search(self, query: np.ndarray, where: SearchFilter, limit: int) -> list[tuple[str, float]]:
        """(revision kref, cosine) of the best ``limit`` rows that pass the filter."""
        with self._lock:
            n = len(self._krefs)
            if not n:
                return []
            query = np.asarray(query, dtype=np.float32)
            candidates = np.flatnonzero(self._mask(where, n))
            narrow = len(candidates) * 4 < n  # a narrow filter: read only its rows (the product is memory-bound)
            if (len(candidates) if narrow else n) >= QUANTIZED_FROM:
                candidates = self._shortlist(candidates, n, narrow, query, max(SHORTLIST, 4 * limit))
                narrow = True
            if narrow:
                scores = self._vectors[candidates] @ query
                picked = self._best(np.arange(len(candidates)), scores, limit)
                return [(self._krefs[candidates[i]], float(scores[i])) for i in picked]
            scores = self._vectors[:n] @ query
            picked = self._best(candidates, scores, limit)
            return [(self._krefs[i], float(scores[i])) for i in picked]

    def _shortlist(self, candidates: np.ndarray, n: int, narrow: bool, query: np.ndarray, size: int
                   ) -> np.ndarray:
        """The ``size`` candidates the 8-bit scan scores best, in slot order (for exact rescoring)."""
        scanner = scan.scanner(self.dim)
        if narrow:
            approx = scanner.scores(self._codes8[candidates], self._scales[candidates], query)
            best = candidates[np.argpartition(-approx, size)[:size]] if len(candidates) > size else candidates
        else:
            approx = scanner.scores(self._codes8[:n], self._scales[:n], query)
            inside = approx[candidates]
            best = candidates[np.argpartition(-inside, size)[:size]] if len(candidates) > size else candidates
        return np.sort(best)

    def text_search(self, query: str, where: SearchFilter, limit: int, fuzzy: bool = False,
                    with_vectors: bool = False) -> list[TextHit]:
        """The best ``limit`` rows by BM25 that pass the filter. ``fuzzy`` matches each query word to the
        vocabulary terms within ``analysis.fuzziness`` edits of it (typo tolerance); ``with_vectors`` returns
        each hit's stored vector too."""
        words = list(dict.fromkeys(analysis.words(query)))
        if not words:
            return []
        with self._lock:
            n = len(self._krefs)
            if not n:
                return []
            scope = self._corpus(where, n)
            scores = self._bm25(self._expand(words) if fuzzy else self._exact(words), n, scope)
            candidates = np.flatnonzero(self._mask(where, n) & (scores > 0))
            picked = self._best(candidates, scores, limit)
            return [(self._krefs[i], float(scores[i]), self._vectors[i].copy() if with_vectors else None)
                    for i in picked]

    def _exact(self, words: list[str]) -> set[int]:
        found = (self._vocabulary.ids.get(t) for t in map(analysis.term, words) if t is not None)
        return {tid for tid in found if tid is not None}

    def _expand(self, words: list[str]) -> set[int]:
        tids: set[int] = set()
        for word in words[:MAX_QUERY_WORDS]:
            term = analysis.term(word)
            if term is None:
                continue
            edits = min(analysis.fuzziness(word), analysis.fuzziness(term))  # "running" → "run": exact
            if not edits:
                tids |= self._exact([word])
                continue
            tids.update(self._vocabulary.near(term, edits, MAX_EXPANSIONS))
        return tids

    def _corpus(self, where: SearchFilter, n: int) -> np.ndarray | None:
        """The rows whose statistics a query's BM25 uses: its project's live rows (so that one project's
        documents never change another's scores), or every live row (None) for a search across projects."""
        if not where.project:
            return None
        return self._alive[:n] & np.isin(self._columns["project"][:n],
                                         self._codes["project"].allowed([where.project]))

    def _bm25(self, tids: Iterable[int], n: int, scope: np.ndarray | None = None) -> np.ndarray:
        """BM25 of every row for the query terms ``tids``; N, df and the average length counted over the rows
        of ``scope`` (every live row when None)."""
        scores = np.zeros(n, dtype=np.float32)
        live = len(self._position) if scope is None else int(np.count_nonzero(scope))
        if not live:
            return scores
        counted = self._alive[:n] if scope is None else scope
        average = float(self._length[:n].sum(where=counted)) / live or 1.0
        for tid in tids:
            slots, tf = self._postings(tid)
            if scope is not None:
                inside = scope[slots]
                slots, tf = slots[inside], tf[inside]
            df = len(slots)
            if not df:
                continue
            idf = math.log(1.0 + (live - df + 0.5) / (df + 0.5))
            norm = K1 * (1.0 - B + B * self._length[slots] / average)
            scores[slots] += np.float32(idf * (K1 + 1.0)) * tf / (tf + norm)
        return scores

    def _postings(self, tid: int) -> tuple[np.ndarray, np.ndarray]:
        """The term's live postings: (slots, term frequencies), each slot at most once."""
        slots, tfs, versions = [], [], []
        if tid + 1 < len(self._offsets):
            start, end = self._offsets[tid], self._offsets[tid + 1]
            slots.append(self._slots[start:end])
            tfs.append(self._tf[start:end])
            versions.append(self._versions[start:end])
        entry = self._delta.get(tid)
        if entry is not None:
            slots.append(np.asarray(entry[0], dtype=np.int32))
            tfs.append(np.asarray(entry[1], dtype=np.float32))
            versions.append(np.asarray(entry[2], dtype=np.uint32))
        if not slots:
            return np.zeros(0, dtype=np.int32), np.zeros(0, dtype=np.float32)
        slot = np.concatenate(slots) if len(slots) > 1 else slots[0]
        tf = np.concatenate(tfs) if len(tfs) > 1 else tfs[0]
        version = np.concatenate(versions) if len(versions) > 1 else versions[0]
        valid = self._alive[slot] & (version == self._version[slot])
        return slot[valid], tf[valid]

    @staticmethod
    def _best(candidates: np.ndarray, scores: np.ndarray, limit: int) -> np.ndarray:
        """The candidates with the highest scores, best first (ties: lower slot first)."""
        if len(candidates) > limit * 4:
            candidates = np.sort(candidates[np.argpartition(-scores[candidates], limit)[:limit]])
        return candidates[np.argsort(-scores[candidates], kind="stable")[:limit]]

    def _mask(self, where: SearchFilter, n: int) -> np.ndarray:
        mask = self._alive[:n].copy()
        if not where.include_deprecated:
            mask &= ~self._deprecated[:n]
        if where.project:
            mask &= np.isin(self._columns["project"][:n], self._codes["project"].allowed([where.project]))
        if where.spaces:
            inside = [code for path, code in self._codes["space"].ids.items()
                      if any(path == s or (not where.exact_spaces and path.startswith(s + "/"))
                             for s in where.spaces)]
            mask &= np.isin(self._columns["space"][:n], inside)
        if where.kinds:
            mask &= np.isin(self._columns["kind"][:n], self._codes["kind"].allowed(where.kinds))
        if where.memory_types:
            mask &= np.isin(self._columns["type"][:n], self._codes["type"].allowed(where.memory_types))
        if where.tags:
            tagged = np.zeros(n, dtype=bool)
            for tag in where.tags:
                tagged[list(self._tags.get(tag, ()))] = True
            mask &= tagged
        return mask
