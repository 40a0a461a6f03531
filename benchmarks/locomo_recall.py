"""Evidence recall on LoCoMo conversations: prints one JSON object.

    python benchmarks/locomo_recall.py --data ../shared/bench/locomo-dev.json [--embedder minilm|hashing]
    python benchmarks/locomo_recall.py --data ../shared/bench/locomo-dev.json --through engage \
        [--variant NAME='{"engage arg": value}' ...] [--model] [--keep DIR] \
        [--surrounding both|previous|none]

Every turn is stored as a memory (title "speaker (date)", summary = the turn's text, its dia_id kept); every
question of categories 1–4 is asked, and evidence recall@k (the share of a question's evidence turns among the
top k results, averaged over questions) is reported overall and by category (1 multi-hop, 2 temporal,
3 open-domain, 4 single-hop).

``--through search`` (the default): each conversation gets a fresh graph and index, written through the graph
→ outbox → index path, and the search function is asked in each mode side by side.

``--through engage``: the conversations go into one data directory (one space each), written and indexed
offline as the appliance would on its start (with the metadata the memory tools write: the session's date as
``event_date``; ``--surrounding`` neighbouring turns of the session — by default the turns before and after — as
``surrounding_text``, which is indexed with the memory but not shown); then the appliance runs in this process
(the real app behind uvicorn on a loopback port) and every question is one ``kumiho_memory_engage`` call
(``limit`` 10, the conversation's space) from the official MCP client over streamable HTTP. Each ``--variant``
adds engage arguments (``default`` = none); the latency of each call (client round trip, and the server's
``timing_ms.total``) is reported per variant as p50/p95. ``--model`` loads the installed default chat model
(for the variants that use it).
"""

from __future__ import annotations

import argparse
import asyncio
import json
import re
import shutil
import statistics
import sys
import tempfile
import time
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from appliance.core.ports import ChatModel, Embedder
from appliance.core.search import TEXT_VERSION, SearchFilter, SearchRequest
from appliance.graph import GraphStore, NewRevision
from appliance.inference.embedding import HashingEmbedder, default_embedder
from appliance.memory.records import SCHEMA
from appliance.search.index import SearchIndex
from appliance.search.service import SearchService
from appliance.search.sync import IndexSync
from benchmarks.mcp_bench import offline_graph, stats
from tests.inprocess import serve_in_process
from tests.mcp_api.clients import call, http_session
from tests.real_model import default_model

MODES = ("hybrid", "vector", "text")
KS = (5, 10)
CATEGORIES = {1: "multi-hop", 2: "temporal", 3: "open-domain", 4: "single-hop"}
PROJECT = "CognitiveMemory"
ENGAGE_LIMIT = 10
MARKER = "locomo-recall.json"  # what a kept data directory holds


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


def questions(sample: dict) -> list[tuple[dict, set[str]]]:
    """The questions asked (categories 1–4 with evidence) and each one's evidence turns (slugs)."""
    return [(qa, {slug(e.strip()) for part in qa["evidence"] for e in part.split(";") if e.strip()})
            for qa in sample["qa"] if qa.get("category") in CATEGORIES and qa.get("evidence")]


def slug(dia_id: str) -> str:
    return dia_id.lower().replace(":", "-")


def recall_at(evidence: set[str], found: list[str]) -> dict[str, float]:
    return {f"@{k}": len(evidence & set(found[:k])) / len(evidence) for k in KS}


class Tally:
    """Recall@k per question, kept by category."""

    def __init__(self) -> None:
        self.by_category: dict[int, list[dict[str, float]]] = {c: [] for c in CATEGORIES}

    def add(self, category: int, recalls: dict[str, float]) -> None:
        self.by_category[category].append(recalls)

    def report(self) -> dict[str, Any]:
        every = [r for rows in self.by_category.values() for r in rows]
        out: dict[str, Any] = {k: round(statistics.fmean(r[k] for r in every), 4) for k in every[0]} if every else {}
        out["by_category"] = {
            f"{c} {CATEGORIES[c]}": {"questions": len(rows), **{k: round(statistics.fmean(r[k] for r in rows), 4)
                                                               for k in rows[0]}}
            for c, rows in self.by_category.items() if rows}
        return out


# -- through the search function --------------------------------------------------------------------------
def evaluate(sample: dict, embedder: Embedder, scratch: Path, tallies: dict[str, Tally]) -> None:
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
        for qa, evidence in questions(sample):
            for mode in MODES:
                hits = service.search(SearchRequest(qa["question"], SearchFilter(spaces=(space,)), mode, max(KS)))
                found = [h.revision_kref.rsplit("/", 1)[1].split(".", 1)[0] for h in hits]
                tallies[mode].add(qa["category"], recall_at(evidence, found))


def through_search(samples: list[dict], embedder: Embedder) -> dict[str, Any]:
    tallies = {mode: Tally() for mode in MODES}
    for sample in samples:
        with tempfile.TemporaryDirectory() as scratch:
            evaluate(sample, embedder, Path(scratch), tallies)
    return {"recall": {mode: tally.report() for mode, tally in tallies.items()}}


# -- through kumiho_memory_engage over MCP -----------------------------------------------------------------
def space_of(sample: dict) -> str:
    return f"/{PROJECT}/locomo-{sample['sample_id']}"


def event_date(session_date: str) -> str:
    """"1:56 pm on 8 May, 2023" → "2023-05-08" (the form a capture's event_date takes); "" when unreadable."""
    try:
        return datetime.strptime(session_date.split(" on ", 1)[-1].strip(), "%d %B, %Y").date().isoformat()
    except ValueError:
        return ""


def memory_rows(sample: dict, surrounding: str) -> list[NewRevision]:
    """Each turn as the memory tools would have written it (an agent storing the conversation turn by turn);
    ``surrounding`` (previous | both | none): which neighbouring turns of its session go into the memory's
    ``surrounding_text`` (indexed with it, not shown)."""
    space = space_of(sample)
    every = turns(sample["conversation"])
    rows = []
    for i, t in enumerate(every):
        meta = {"schema": SCHEMA, "type": "summary", "memory_type": "summary",
                "title": f"{t['speaker']} ({t['date']})", "summary": t["text"], "space": space.strip("/"),
                "dia_id": t["dia_id"], "speaker": t["speaker"]}
        if found := event_date(t["date"]):
            meta["event_date"] = found
        around = [] if surrounding == "none" else [i - 1] if surrounding == "previous" else [i - 1, i + 1]
        context = [f"{every[j]['speaker']}: {every[j]['text']}" for j in around
                   if 0 <= j < len(every) and every[j]["session"] == t["session"]]
        if context:
            meta["surrounding_text"] = "\n".join(context)
        rows.append(NewRevision(f"kref:/{space}/{slug(t['dia_id'])}.conversation", meta))
    return rows


def ingest(root: Path, samples: list[dict], embedder_name: str, surrounding: str) -> None:
    with offline_graph(root, embedder_name) as graph:
        for sample in samples:
            graph.ensure_space(space_of(sample))
            result = graph.create_revisions(memory_rows(sample, surrounding))
            assert not result.failures, result.failures


async def ask(base_url: str, samples: list[dict], variants: dict[str, dict[str, Any]]) -> dict[str, Any]:
    report: dict[str, Any] = {}
    async with http_session(base_url) as session:
        for name, extra in variants.items():
            tally, round_trip, server = Tally(), list[float](), list[float]()
            started = time.perf_counter()
            for sample in samples:
                for qa, evidence in questions(sample):
                    arguments = {"query": qa["question"], "space_paths": [space_of(sample)], "limit": ENGAGE_LIMIT,
                                 **extra}
                    sent = time.perf_counter()
                    answer = await call(session, "kumiho_memory_engage", **arguments)
                    round_trip.append((time.perf_counter() - sent) * 1000)
                    server.append(answer["timing_ms"]["total"])
                    found = [r["item_kref"].rsplit("/", 1)[1].split(".", 1)[0] for r in answer["results"]]
                    tally.add(qa["category"], recall_at(evidence, found))
            report[name] = {"arguments": extra, "recall": tally.report(),
                            "engage_ms": {"round_trip": stats(round_trip), "server": stats(server)},
                            "seconds": round(time.perf_counter() - started, 1)}
    return report


def through_engage(samples: list[dict], embedder_name: str, variants: dict[str, dict[str, Any]],
                   model: ChatModel | None, keep: Path | None, surrounding: str) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as scratch:
        root = keep or Path(scratch) / "data"
        marker = {"samples": [s["sample_id"] for s in samples], "embedder": embedder_name, "surrounding": surrounding,
                  "text_version": TEXT_VERSION}
        started = time.perf_counter()
        if not keep or not (root / MARKER).exists() or json.loads((root / MARKER).read_text()) != marker:
            if root.exists():
                shutil.rmtree(root)
            ingest(root, samples, embedder_name, surrounding)
            (root / MARKER).write_text(json.dumps(marker))
        ingest_seconds = round(time.perf_counter() - started, 1)
        with serve_in_process(root, model, search={"embedder": embedder_name}) as app:
            report = asyncio.run(ask(app.base_url, samples, variants))
    return {"ingest_seconds": ingest_seconds, "surrounding": surrounding, "limit": ENGAGE_LIMIT, "variants": report}


def parse_variant(text: str) -> tuple[str, dict[str, Any]]:
    name, _, arguments = text.partition("=")
    return name, json.loads(arguments) if arguments else {}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, type=Path, help="a LoCoMo-format JSON file")
    parser.add_argument("--embedder", choices=("minilm", "hashing"), default="minilm")
    parser.add_argument("--conversations", type=int, default=0, help="only the first N (0 = all)")
    parser.add_argument("--through", choices=("search", "engage"), default="search")
    parser.add_argument("--variant", action="append", default=[], type=parse_variant,
                        help='engage only: NAME=\'{"argument": value}\' (repeatable; default: one plain variant)')
    parser.add_argument("--model", action="store_true", help="engage only: load the installed default chat model")
    parser.add_argument("--surrounding", choices=("both", "previous", "none"), default="both",
                        help="engage only: the neighbouring turns stored as each memory's surrounding_text")
    parser.add_argument("--keep", type=Path, help="engage only: ingest into this directory once and reuse it (its "
                        "index is rebuilt on start when the indexed text changed)")
    args = parser.parse_args()
    samples = json.loads(args.data.read_text())
    if args.conversations:
        samples = samples[: args.conversations]
    start = time.perf_counter()
    report: dict[str, Any] = {"benchmark": "locomo_evidence_recall", "through": args.through, "data": str(args.data),
                              "conversations": len(samples),
                              "questions": sum(len(questions(s)) for s in samples)}
    if args.through == "search":
        embedder: Embedder = default_embedder() if args.embedder == "minilm" else HashingEmbedder()
        report["embedder"] = embedder.model_id
        report.update(through_search(samples, embedder))
    else:
        model = default_model() if args.model else None
        report["embedder"] = args.embedder
        report["model"] = model.model_id if model else None
        report.update(through_engage(samples, args.embedder, dict(args.variant or [("default", {})]), model,
                                      args.keep, args.surrounding))
    report["seconds"] = round(time.perf_counter() - start, 1)
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
