"""Evidence recall on LoCoMo conversations: prints one JSON object.

    python benchmarks/locomo_recall.py --data ../shared/bench/locomo-dev.json [--embedder minilm|hashing]

Each conversation gets a fresh graph and index. Every turn is stored as a memory (title "speaker (date)",
summary = the turn's text, its dia_id kept) through the real write path (graph → outbox → index); every
question of categories 1–4 is asked, and evidence recall@k (the share of a question's evidence turns among
the top k results, averaged over questions) is reported for each search mode side by side.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from appliance.core.ports import Embedder
from appliance.core.search import SearchFilter, SearchRequest
from appliance.graph import GraphStore, NewRevision
from appliance.inference.embedding import HashingEmbedder, default_embedder
from appliance.search.index import SearchIndex
from appliance.search.service import SearchService
from appliance.search.sync import IndexSync

MODES = ("hybrid", "vector", "text")
KS = (5, 10)


def turns(conversation: dict) -> list[dict[str, str]]:
    found = []
    for key, value in conversation.items():
        match = re.fullmatch(r"session_(\d+)", key)
        if not match or not isinstance(value, list):
            continue
        date = conversation.get(f"session_{match.group(1)}_date_time", "")
        for turn in value:
            found.append({"dia_id": turn["dia_id"], "speaker": turn["speaker"], "text": turn["text"],
                          "date": date, "session": match.group(1)})
    return found


def slug(dia_id: str) -> str:
    return dia_id.lower().replace(":", "-")


def evaluate(sample: dict, embedder: Embedder, scratch: Path) -> dict[str, dict[str, list[float]]]:
    space = f"/CognitiveMemory/locomo/{sample['sample_id']}"
    with GraphStore.open(scratch / "graph.kuzu", buffer_pool_mb=128) as graph:
        graph.ensure_space(space)
        rows = [NewRevision(f"kref:/{space}/{slug(t['dia_id'])}.conversation",
                            {"title": f"{t['speaker']} ({t['date']})", "summary": t["text"], "dia_id": t["dia_id"],
                             "speaker": t["speaker"], "memory_type": "conversation"})
                for t in turns(sample["conversation"])]
        graph.create_revisions(rows)
        index = SearchIndex(scratch / "index", embedder.dim, embedder.model_id)
        IndexSync(graph, index, embedder).run_pending()
        index.optimize()
        service = SearchService(index, embedder)
        recalls: dict[str, dict[str, list[float]]] = {m: {f"@{k}": [] for k in KS} for m in MODES}
        for qa in sample["qa"]:
            if qa.get("category") == 5 or not qa.get("evidence"):
                continue
            evidence = {slug(e.strip()) for e in qa["evidence"]}
            for mode in MODES:
                hits = service.search(SearchRequest(qa["question"], SearchFilter(spaces=(space,)), mode, max(KS)))
                found = [h.revision_kref.rsplit("/", 1)[1].split(".", 1)[0] for h in hits]
                for k in KS:
                    recalls[mode][f"@{k}"].append(len(evidence & set(found[:k])) / len(evidence))
    return recalls


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, type=Path, help="a LoCoMo-format JSON file")
    parser.add_argument("--embedder", choices=("minilm", "hashing"), default="minilm")
    parser.add_argument("--conversations", type=int, default=0, help="only the first N (0 = all)")
    args = parser.parse_args()
    samples = json.loads(args.data.read_text())
    if args.conversations:
        samples = samples[: args.conversations]
    embedder: Embedder = default_embedder() if args.embedder == "minilm" else HashingEmbedder()
    start = time.perf_counter()
    totals: dict[str, dict[str, list[float]]] = {m: {f"@{k}": [] for k in KS} for m in MODES}
    for sample in samples:
        with tempfile.TemporaryDirectory() as scratch:
            for mode, by_k in evaluate(sample, embedder, Path(scratch)).items():
                for k, values in by_k.items():
                    totals[mode][k] += values
    report = {
        "benchmark": "locomo_evidence_recall", "data": str(args.data), "embedder": embedder.model_id,
        "conversations": len(samples), "questions": len(totals["hybrid"]["@5"]),
        "recall": {mode: {k: round(statistics.fmean(v), 4) for k, v in by_k.items()} for mode, by_k in totals.items()},
        "seconds": round(time.perf_counter() - start, 1),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
