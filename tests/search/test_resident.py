"""The resident table: exact vector top-k and BM25 under every filter, following upserts and deletes.

BM25 is checked against a brute-force recomputation over the live rows (the same analyzer, the formula of
resident.py), for hand-picked cases and for random sequences of writes (hypothesis).
"""

from __future__ import annotations

import math
import threading
from collections import Counter
from pathlib import Path

import numpy as np
import pyarrow as pa
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from lancedb.index import FTS

from appliance.core.search import SearchFilter
from appliance.search import analysis, resident
from appliance.search.index import IndexRow, SearchIndex
from appliance.search.resident import FOLD_AT, ResidentTable

WORDS = ("alpha", "beta", "gamma", "delta", "coffee", "morning", "transport", "layer", "graph", "database",
         "drinks", "running", "runs", "the", "and", "zeppelin")


def row(n: int, space: str = "/P/a", text: str | None = None, **extra: object) -> dict[str, object]:
    vector = np.zeros(4, dtype=np.float32)
    vector[n % 4] = 1.0
    record = {"revision_kref": f"k{n}", "project": space.split("/")[1], "space": space, "kind": "conversation",
              "memory_type": "fact", "tags": [], "deprecated": False, "vector": vector, **extra}
    if text is not None:
        record["text"] = text
    return record


def keys(hits: list[tuple[str, float, np.ndarray | None]]) -> list[str]:
    return [h[0] for h in hits]


def brute_bm25(texts: dict[str, str], query: str) -> dict[str, float]:
    """BM25 (k1 1.2, b 0.75) over ``texts`` (the live rows), recomputed from scratch."""
    docs = {k: Counter(analysis.terms(t)) for k, t in texts.items()}
    if not docs:
        return {}
    average = sum(sum(c.values()) for c in docs.values()) / len(docs) or 1.0
    wanted = {t for t in map(analysis.term, analysis.words(query)) if t is not None}
    scores: dict[str, float] = {}
    for term in wanted:
        holders = [k for k, c in docs.items() if term in c]
        idf = math.log(1 + (len(docs) - len(holders) + 0.5) / (len(holders) + 0.5))
        for k in holders:
            tf, length = docs[k][term], sum(docs[k].values())
            scores[k] = scores.get(k, 0.0) + idf * tf * 2.2 / (tf + 1.2 * (0.25 + 0.75 * length / average))
    return scores


def assert_same_scores(table: ResidentTable, texts: dict[str, str], query: str) -> None:
    found = {k: s for k, s, _ in table.text_search(query, SearchFilter(include_deprecated=True), 10_000)}
    expected = brute_bm25(texts, query)
    assert found.keys() == expected.keys(), query
    for k, score in expected.items():
        assert found[k] == pytest.approx(score, rel=1e-4), (query, k)


# ------------------------------------------------------------------------------------------------ vectors
def test_exact_top_k_with_filters() -> None:
    matrix = ResidentTable(4)
    matrix.upsert([row(0), row(1, "/P/ab"), row(4, "/P/a/deep", tags=["x"]), row(8, "/Q/a", kind="skill")])
    query = np.array([1, 0, 0, 0], dtype=np.float32)
    assert [k for k, _ in matrix.search(query, SearchFilter(), 10)][:3] == ["k0", "k4", "k8"]
    assert [k for k, _ in matrix.search(query, SearchFilter(spaces=("/P/a",)), 10)] == ["k0", "k4"]
    assert [k for k, _ in matrix.search(query, SearchFilter(project="Q"), 10)] == ["k8"]
    assert [k for k, _ in matrix.search(query, SearchFilter(kinds=("skill",)), 10)] == ["k8"]
    assert [k for k, _ in matrix.search(query, SearchFilter(tags=("x",)), 10)] == ["k4"]
    assert matrix.search(query, SearchFilter(memory_types=("nope",)), 10) == []
    assert matrix.search(query, SearchFilter(), 1) == [("k0", 1.0)]


def test_upserts_replace_rows_and_deletes_remove_them() -> None:
    matrix = ResidentTable(4)
    matrix.upsert([row(0, tags=["x"]), row(4)])
    matrix.upsert([row(0, tags=["y"], deprecated=True)])
    query = np.array([1, 0, 0, 0], dtype=np.float32)
    assert [k for k, _ in matrix.search(query, SearchFilter(), 10)] == ["k4"]
    assert [k for k, _ in matrix.search(query, SearchFilter(include_deprecated=True, tags=("y",)), 10)] == ["k0"]
    assert matrix.search(query, SearchFilter(include_deprecated=True, tags=("x",)), 10) == []
    matrix.delete(["k4"])
    assert len(matrix) == 1 and matrix.search(query, SearchFilter(), 10) == []


def test_it_grows_past_its_first_capacity() -> None:
    matrix = ResidentTable(4)
    matrix.upsert([row(n, text=f"note {n}") for n in range(5000)])
    hits = matrix.search(np.array([0, 1, 0, 0], dtype=np.float32), SearchFilter(), 3)
    assert len(matrix) == 5000 and all(score == 1.0 for _, score in hits)
    assert keys(matrix.text_search("note 4321", SearchFilter(), 1)) == ["k4321"]


def test_narrow_and_wide_filters_give_the_exact_top_k() -> None:
    rng = np.random.default_rng(3)
    vectors = rng.standard_normal((400, 4)).astype(np.float32)
    table = ResidentTable(4)
    table.upsert([row(n, f"/P/s{n % 20}", vector=vectors[n]) for n in range(400)])
    query = rng.standard_normal(4).astype(np.float32)
    for where, members in ((SearchFilter(spaces=("/P/s3",)), [n for n in range(400) if n % 20 == 3]),  # narrow
                           (SearchFilter(project="P"), list(range(400)))):  # every row
        expected = sorted(members, key=lambda n: -float(vectors[n] @ query))[:7]
        hits = table.search(query, where, 7)
        assert [k for k, _ in hits] == [f"k{n}" for n in expected]
        assert [s for _, s in hits] == pytest.approx([float(vectors[n] @ query) for n in expected], rel=1e-5)


def test_the_8_bit_scan_returns_the_exact_cosines_of_the_rows_it_picks(monkeypatch: pytest.MonkeyPatch) -> None:
    """From QUANTIZED_FROM rows the leg scans 8-bit codes and rescores a shortlist in float32: the scores it
    returns are the exact cosines, under a wide and a narrow filter, after upserts and deletes; with a
    shortlist as long as the table, the hits are the exact scan's too."""
    rng = np.random.default_rng(8)
    dim, count = 32, 3000
    vectors = rng.standard_normal((count, dim)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    table = ResidentTable(dim)
    table.upsert([row(n, f"/P/s{n % 20}", vector=vectors[n]) for n in range(count)])
    table.upsert([row(5, "/P/s5", vector=vectors[6])])  # a changed vector is re-coded
    vectors[5] = vectors[6]
    table.delete(["k7"])
    live = [n for n in range(count) if n != 7]
    query = rng.standard_normal(dim).astype(np.float32)
    cases = ((SearchFilter(project="P"), live), (SearchFilter(spaces=("/P/s3",)), [n for n in live if n % 20 == 3]))
    for shortlist, exact in ((4 * count, True), (64, False)):
        monkeypatch.setattr(resident, "QUANTIZED_FROM", 0)
        monkeypatch.setattr(resident, "SHORTLIST", shortlist)
        for where, members in cases:
            hits = table.search(query, where, 10)
            assert len(hits) == 10 and all(int(k[1:]) in members for k, _ in hits)
            assert [s for _, s in hits] == pytest.approx([float(vectors[int(k[1:])] @ query) for k, _ in hits],
                                                         rel=1e-5)
            assert [s for _, s in hits] == sorted((s for _, s in hits), reverse=True)
            if exact:
                best = sorted(members, key=lambda n: -float(vectors[n] @ query))[:10]
                assert [k for k, _ in hits] == [f"k{n}" for n in best]


# --------------------------------------------------------------------------------------------------- BM25
def test_the_analyzer_lower_cases_folds_drops_stop_words_and_stems() -> None:
    assert analysis.terms("The Café RUNNING, what did you drink? transports_x") == [
        "cafe", "run", "drink", "transports_x"]
    assert analysis.term("x" * 41) is None


def test_bm25_orders_by_rarity_frequency_and_length() -> None:
    texts = {"k0": "coffee coffee coffee in the morning", "k1": "coffee in the morning",
             "k2": "coffee in the morning with milk and sugar and a long story about the weather",
             "k3": "zeppelin morning", "k4": "morning tea", "k5": "morning walk"}
    table = ResidentTable(4)
    table.upsert([row(int(k[1]), text=t) for k, t in texts.items()])
    assert keys(table.text_search("coffee", SearchFilter(), 10)) == ["k0", "k1", "k2"]  # tf, then length
    assert keys(table.text_search("zeppelin morning", SearchFilter(), 10))[0] == "k3"  # the rare term counts
    for query in ("coffee", "zeppelin morning", "coffee morning milk", "nothing here", "the and"):
        assert_same_scores(table, texts, query)
    assert table.text_search("the and of", SearchFilter(), 10) == []  # stop words only
    hit = table.text_search("zeppelin", SearchFilter(), 1, with_vectors=True)[0]
    assert hit[0] == "k3" and hit[2] is not None and hit[2].tolist() == [0, 0, 0, 1]


def test_text_search_applies_every_filter() -> None:
    table = ResidentTable(4)
    table.upsert([row(0, text="coffee"), row(1, "/P/ab", text="coffee"), row(2, "/P/a/deep", text="coffee",
                                                                           tags=["x"]),
                  row(3, "/Q/a", text="coffee", kind="skill"), row(5, text="coffee", deprecated=True)])
    found = lambda **f: sorted(keys(table.text_search("coffee", SearchFilter(**f), 10)))  # noqa: E731
    assert found() == ["k0", "k1", "k2", "k3"]
    assert found(spaces=("/P/a",)) == ["k0", "k2"]
    assert found(project="Q") == found(kinds=("skill",)) == ["k3"]
    assert found(tags=("x",)) == ["k2"]
    assert found(include_deprecated=True, spaces=("/P/a",)) == ["k0", "k2", "k5"]
    assert found(memory_types=("nope",)) == []


def test_changed_texts_leave_no_stale_postings_and_deletes_leave_the_statistics() -> None:
    table = ResidentTable(4)
    texts = {f"k{n}": f"alpha beta {WORDS[n]}" for n in range(8)}
    table.upsert([row(int(k[1:]), text=t) for k, t in texts.items()])
    texts["k1"] = "zeppelin over the database"
    table.upsert([row(1, text=texts["k1"])])
    assert "k1" not in keys(table.text_search("beta", SearchFilter(), 10))
    assert keys(table.text_search("zeppelin", SearchFilter(), 10)) == ["k1"]
    texts["k1"] = "alpha beta beta"  # back to old terms: the first postings stay stale
    table.upsert([row(1, text=texts["k1"])])
    table.upsert([row(2, tags=["x"])])  # no text: the row keeps its text
    table.delete(["k3", "k4"])
    del texts["k3"], texts["k4"]
    for query in ("beta", "alpha zeppelin", "gamma delta coffee database", "beta morning"):
        assert_same_scores(table, texts, query)
    assert keys(table.text_search("beta", SearchFilter(), 1)) == ["k1"]


def test_typos_find_terms_within_the_allowed_edits() -> None:
    table = ResidentTable(4)
    table.upsert([row(0, text="the transport layer"), row(1, text="a car and a cat"),
                  row(2, text="graph database"), row(3, text="fun in the sun")])
    assert keys(table.text_search("transprot", SearchFilter(), 10)) == []
    assert keys(table.text_search("transprot", SearchFilter(), 10, fuzzy=True)) == ["k0"]
    assert keys(table.text_search("layr databse", SearchFilter(), 10, fuzzy=True)) == ["k0", "k2"]
    assert keys(table.text_search("cap", SearchFilter(), 10, fuzzy=True)) == []  # ≤ 3 letters: exact only
    assert keys(table.text_search("grapj", SearchFilter(), 10, fuzzy=True)) == ["k2"]
    assert keys(table.text_search("running", SearchFilter(), 10, fuzzy=True)) == []  # its stem "run" is short
    # past the bigram index's first build the same lookups go through it (and through the new terms after it)
    table.upsert([row(10 + n, text=f"filler{n} word{n * 7}") for n in range(6000)])
    table.upsert([row(9, text="zeppelin hangar")])
    assert keys(table.text_search("transprot", SearchFilter(), 10, fuzzy=True)) == ["k0"]
    assert keys(table.text_search("zepelin hangr", SearchFilter(), 10, fuzzy=True)) == ["k9"]
    assert "k12" in keys(table.text_search("filler2", SearchFilter(), 10, fuzzy=True))


def test_the_delta_folds_into_the_postings_and_search_stays_exact() -> None:
    table = ResidentTable(4)
    texts: dict[str, str] = {}
    rng = np.random.default_rng(7)
    for batch in range(12):
        rows = []
        for n in range(batch * 300, batch * 300 + 400):  # overlapping batches: many texts change
            texts[f"k{n}"] = " ".join(rng.choice(WORDS, 10)) + f" w{n % 97}"
            rows.append(row(n, text=texts[f"k{n}"]))
        table.upsert(rows)
    assert len(table._slots) > 0 and table._delta_size < FOLD_AT  # folded (only folds fill the CSR here)
    for query in ("coffee", "transport layer", "w5 zeppelin", "runs"):
        assert_same_scores(table, texts, query)


def test_a_bulk_load_matches_row_by_row_upserts() -> None:
    texts = {f"k{n}": f"{WORDS[n % len(WORDS)]} {WORDS[(n * 5) % len(WORDS)]} note{n % 13}" for n in range(300)}
    rows = [row(int(k[1:]), f"/P/s{n % 3}", text=t, tags=["x"] if n % 4 else [])
            for n, (k, t) in enumerate(texts.items())]
    by_rows = ResidentTable(4)
    by_rows.upsert(rows)
    loaded = ResidentTable(4)
    loaded.load(pa.Table.from_pylist([{**r, "vector": r["vector"].tolist()} for r in rows],  # type: ignore[union-attr]
                                     schema=pa.schema([
                                         ("revision_kref", pa.string()), ("project", pa.string()),
                                         ("space", pa.string()), ("kind", pa.string()),
                                         ("memory_type", pa.string()), ("tags", pa.list_(pa.string())),
                                         ("deprecated", pa.bool_()), ("vector", pa.list_(pa.float32(), 4)),
                                         ("text", pa.string())])))
    for where in (SearchFilter(), SearchFilter(spaces=("/P/s1",), tags=("x",))):
        for query in ("coffee note3", "alpha transport", "database"):
            assert loaded.text_search(query, where, 20) == by_rows.text_search(query, where, 20)
        vector = np.array([0, 1, 0, 0], dtype=np.float32)
        assert loaded.search(vector, where, 5) == by_rows.search(vector, where, 5)
    assert_same_scores(loaded, texts, "gamma note7")


operations = st.lists(st.one_of(
    st.tuples(st.just("upsert"), st.integers(0, 11), st.lists(st.sampled_from(WORDS), max_size=8)),
    st.tuples(st.just("delete"), st.integers(0, 11), st.just([])),
    st.tuples(st.just("fold"), st.just(0), st.just([]))), max_size=40)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(operations, st.lists(st.sampled_from(WORDS), min_size=1, max_size=4))
def test_bm25_equals_a_brute_force_recomputation_after_any_writes(ops: list, query: list[str]) -> None:
    table = ResidentTable(4)
    texts: dict[str, str] = {}
    for op, n, words in ops:
        if op == "upsert":
            texts[f"k{n}"] = " ".join(words)
            table.upsert([row(n, text=texts[f"k{n}"])])
        elif op == "delete":
            texts.pop(f"k{n}", None)
            table.delete([f"k{n}"])
        else:
            table._fold()
    assert_same_scores(table, texts, " ".join(query))
    limit = 3
    top = table.text_search(" ".join(query), SearchFilter(), limit)
    expected = sorted(brute_bm25(texts, " ".join(query)).values(), reverse=True)[:limit]
    assert [s for _, s, _ in top] == pytest.approx(expected, rel=1e-4)


def test_searches_run_while_texts_change() -> None:
    table = ResidentTable(4)
    table.upsert([row(n, text="alpha beta") for n in range(200)])
    failures: list[BaseException] = []
    done = threading.Event()

    def search() -> None:
        try:
            while not done.is_set():
                for hit in table.text_search("alpha gamma zepelin", SearchFilter(), 20, fuzzy=True,
                                             with_vectors=True):
                    assert hit[1] > 0 and hit[2] is not None
        except BaseException as exc:  # reported by the main thread
            failures.append(exc)

    readers = [threading.Thread(target=search) for _ in range(2)]
    for reader in readers:
        reader.start()
    texts = {f"k{n}": "alpha beta" for n in range(200)}
    for round_ in range(30):
        changed = {f"k{(round_ * 37 + i) % 400}": f"{WORDS[(round_ + i) % len(WORDS)]} zeppelin{i % 3}"
                   for i in range(60)}
        texts.update(changed)
        table.upsert([row(int(k[1:]), text=t) for k, t in changed.items()])
        table.delete([f"k{round_ * 11 % 400}"])
        texts.pop(f"k{round_ * 11 % 400}", None)
    done.set()
    for reader in readers:
        reader.join()
    assert not failures, failures
    assert_same_scores(table, texts, "alpha gamma zeppelin1 transport")


# ---------------------------------------------------------------------------------------- the LanceDB side
def test_an_old_index_with_a_lancedb_fts_index_opens_without_it(tmp_path: Path) -> None:
    index = SearchIndex(tmp_path, 4, "m")
    index.upsert([IndexRow(revision_kref=f"kref://P/a/m{n}.note?r=1", item_kref=f"kref://P/a/m{n}.note",
                           project="P", space="/P/a", spaces=["/P", "/P/a"], kind="note", memory_type="fact",
                           tags=[], deprecated=False, created_at="2026-01-01T00:00:00+00:00", title=f"m{n}",
                           text=f"memory {n} about {WORDS[n]}", text_hash=str(n),
                           vector=np.eye(4, dtype=np.float32)[n % 4]) for n in range(6)])
    assert [i.index_type for i in index._table.list_indices()] == ["BTree"]  # the key only: no full-text index
    index._table.create_index("text", config=FTS(with_position=False), replace=True)  # as older versions did
    reopened = SearchIndex(tmp_path, 4, "m")
    assert [i.index_type for i in reopened._table.list_indices()] == ["BTree"] and reopened.count() == 6
    hits = reopened.text_search("coffee memory", SearchFilter(spaces=("/P",)), 3, with_vectors=True)
    assert hits[0].revision_kref == "kref://P/a/m4.note?r=1" and hits[0].vector is not None
    assert [h.revision_kref for h in reopened.text_search("gamma", SearchFilter(), 3, fuzzy=True)] == [
        "kref://P/a/m2.note?r=1"]
