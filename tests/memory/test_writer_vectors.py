"""The memory writer embeds each memory's text once per call: the stacking search queries with that vector, and
after the commit the index is handed the new revisions with the vectors keyed by their searchable text exactly as
committed (so the index need not embed them again). Real graph, real LanceDB index, the hashing embedder."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from appliance.core.search import searchable_text
from appliance.inference.embedding import HashingEmbedder
from appliance.memory.writer import Draft, MemoryWriter
from tests.search.conftest import CountingEmbedder, Stack


def draft(title: str, summary: str, **fields: object) -> Draft:
    return Draft(project="CognitiveMemory", space="/CognitiveMemory/ops", kind="conversation", memory_type="fact",
                 title=title, summary=summary, **fields)  # type: ignore[arg-type]


def test_a_call_embeds_its_memories_once_and_stages_the_committed_texts(tmp_path: Path) -> None:
    embedder = CountingEmbedder()
    stack = Stack(tmp_path, embedder)
    staged: list[tuple[list[str], dict[str, np.ndarray]]] = []
    try:
        writer = MemoryWriter(stack.graph, stack.search, tmp_path / "artifacts",
                              stage=lambda krefs, vectors: staged.append((krefs, vectors)))
        plans = writer.plan_all([draft("Backup window", "The nightly backup runs at 02:00 UTC.", tags=["ops"]),
                                 draft("Pager rota", "Alex carries the pager on weekends.")])
        results = writer.write(plans)
        assert embedder.calls == [2]  # both texts in one call; the stacking searches reused them
        ((krefs, vectors),) = staged
        assert krefs == [r["revision_kref"] for r in results]
        docs = {doc.revision_kref: doc for doc in stack.graph.unindexed()}
        committed = [searchable_text(docs[k].item_name, docs[k].metadata, docs[k].tags) for k in krefs]
        assert sorted(vectors) == sorted(committed)
        assert "ops" in committed[0]  # the user tag is part of the text the index builds
        for text in committed:
            assert np.allclose(vectors[text], HashingEmbedder().embed([text])[0])

        stack.sync.run_pending()  # a similar memory stored later stacks on the first (its own vector searched)
        embedder.calls.clear()
        (again,) = writer.write(writer.plan_all([draft("Backup window", "The nightly backup runs at 02:00 UTC.")]))
        assert again["stacked"] is True and again["item_kref"] == results[0]["item_kref"]
        assert embedder.calls == [1]
    finally:
        stack.graph.close()
