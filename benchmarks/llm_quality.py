"""What the local chat model produces for the appliance's model-backed work, and how fast (JSON; optionally a
Markdown report for docs/).

    python benchmarks/llm_quality.py                              # the installed default model
    python benchmarks/llm_quality.py --model qwen-1.5b.gguf       # any GGUF
    python benchmarks/llm_quality.py --report docs/model-quality.md

Samples: benchmarks/data/llm_samples.json (hand-written). Stages:

* ``appliance_consolidate``: the 40-message session through the real appliance (Kùzu, LanceDB, MiniLM,
  spaCy, the model): ingest + add_response for every message, then ``consolidate``; wall time and the
  process's peak RSS (every default model loaded) — the issue's ≤ 30 s and ≤ 1.2 GB targets;
* ``summaries``: every session summarised (``consolidation.summarize``), with the share of its key facts
  (names, numbers, products) the summary mentions;
* ``implications``: implication queries for each sample memory (edge discovery's prompt);
* ``reformulations``: graph-augmented recall's alternative queries;
* ``dream``: one Dream State assessment batch of the 12 sample memories, scored against the expected
  keep/deprecate labels (before the guardrails: what the model proposes).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from appliance.app import open_services
from appliance.config import load_settings
from appliance.core.model import Revision
from appliance.inference.llm import LlamaModel
from appliance.memory import consolidation
from appliance.memory.augmented import angles
from appliance.memory.client import Client
from appliance.memory.dream import DreamParams, assess
from appliance.memory.edges import implication_queries
from appliance.memory.model_options import patterns_only
from appliance.operations.sessions import AddResponseInput, ConsolidateInput, IngestInput
from appliance.services import handlers
from benchmarks.llm_bench import open_model, rss_mb

SAMPLES = Path(__file__).with_name("data") / "llm_samples.json"


def coverage(text: str, facts: list[str]) -> dict[str, Any]:
    lowered = text.lower()
    found = [f for f in facts if f.lower() in lowered]
    return {"key_facts": len(facts), "mentioned": len(found), "missing": [f for f in facts if f not in found]}


def appliance_consolidate(model: LlamaModel, session: dict[str, Any]) -> dict[str, Any]:
    with tempfile.TemporaryDirectory() as tmp:
        # long deadlines: on a loaded machine the call is slow, and a slow answer is still a measurement
        settings = load_settings(data_dir=Path(tmp), maintenance={"idle_consolidation_minutes": 0,
                                                                  "dream_state_time": ""},
                                 inference={"request_timeout_seconds": 3600, "tool_wait_seconds": 240})
        with open_services(settings, chat_model=model) as services:
            tools, client = handlers(services.families), Client()
            sid = "bench-session"
            started = time.perf_counter()
            for message in session["messages"]:
                if message["role"] == "user":
                    tools["kumiho_memory_ingest"](
                        IngestInput(user_id="bench", session_id=sid, message=message["content"]), client)
                else:
                    tools["kumiho_memory_add_response"](
                        AddResponseInput(session_id=sid, response=message["content"]), client)
            buffered = time.perf_counter() - started
            started = time.perf_counter()
            model.load(timeout=600)  # what a running appliance has done already (sha256 check included)
            # spaCy loads on the first consolidation
            services.maintenance.consolidator.redact_pii(["Warm-up for Maria Lopez"])
            loading = time.perf_counter() - started
            started = time.perf_counter()
            result = tools["kumiho_memory_consolidate"](ConsolidateInput(session_id=sid), client)
            seconds = time.perf_counter() - started
    return {"messages": len(session["messages"]), "buffering_seconds": round(buffered, 2),
            "model_and_spacy_load_seconds": round(loading, 2),
            "consolidate_seconds": round(seconds, 2), **call_costs(model), "peak_rss_mb": round(rss_mb()),
            "success": result.get("success"), "summary": result.get("summary"),
            **coverage(str(result.get("summary")), session["key_facts"])}


def summaries(model: LlamaModel, sessions: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for session in sessions:
        texts = patterns_only([m["content"] for m in session["messages"]])
        started = time.perf_counter()
        shaped = consolidation.summarize(model, [(m["role"], t) for m, t in zip(session["messages"], texts,
                                                                                 strict=True)], timeout=1800)
        text = consolidation.summary_text(shaped)
        out.append({"id": session["id"], "messages": len(session["messages"]),
                    "seconds": round(time.perf_counter() - started, 2), **call_costs(model),
                    "title": shaped["title"], "summary": text,
                    **coverage(f"{shaped['title']} {text}", session["key_facts"])})
    return out


def call_costs(model: LlamaModel) -> dict[str, Any]:
    """What the model's last call read and generated: independent of the machine's load, unlike seconds."""
    done = model.last_completion
    if done is None:
        return {}
    return {"prompt_tokens": done.prompt_tokens, "cached_prompt_tokens": done.cached_prompt_tokens,
            "generated_tokens": done.completion_tokens, "decoding_steps": done.decoding_steps}


def implications(model: LlamaModel, memories: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for memory in memories:
        started = time.perf_counter()
        queries = implication_queries(model, f"{memory['title']}\n{memory['summary']}", 5, timeout=600)
        out.append({"id": memory["id"], "memory": memory["title"], "seconds": round(time.perf_counter() - started, 2),
                    "queries": queries, "expected_situations": memory["situations"]})
    return out


def reformulations(model: LlamaModel, queries: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for query in queries:
        started = time.perf_counter()
        found = angles(model, query["query"], timeout=600)
        out.append({"id": query["id"], "query": query["query"], "about": query["about"],
                    "seconds": round(time.perf_counter() - started, 2), "angles": found})
    return out


def dream(model: LlamaModel, memories: list[dict[str, Any]]) -> dict[str, Any]:
    now = datetime.now(UTC).isoformat()
    batch = [Revision(f"kref://Bench/dream/{m['id']}.conversation?r=1", f"kref://Bench/dream/{m['id']}.conversation",
                      1, ["latest"], {"title": m["title"], "summary": m["summary"], "type": m["type"]}, now, now,
                      "local", "local", False, None) for m in memories]
    started = time.perf_counter()
    found, dropped = assess(model, batch, DreamParams(project="Bench"), timeout=900)
    seconds = time.perf_counter() - started
    proposed = {memories[a.index]["id"] for a in found if a.deprecate}
    expected = {m["id"] for m in memories if m["expect"] == "deprecate"}
    return {"memories": len(memories), "seconds": round(seconds, 2), "assessed": len(found), "dropped": dropped,
            "proposed_deprecations": sorted(proposed), "expected_deprecations": sorted(expected),
            "correct_proposals": len(proposed & expected), "wrong_proposals": len(proposed - expected),
            "tags": {memories[a.index]["id"]: a.tags for a in found if a.tags},
            "links": {memories[a.index]["id"]: [memories[i]["id"] for i in a.related] for a in found if a.related}}


def costs(call: dict[str, Any]) -> str:
    if "generated_tokens" not in call:
        return ""
    return (f" (read {call['prompt_tokens']} tokens, generated {call['generated_tokens']} in "
            f"{call['decoding_steps']} model passes)")


def markdown(result: dict[str, Any]) -> str:
    lines = [f"# What the local model produced: {result['model']}", "",
             "Generated by `benchmarks/llm_quality.py` over `benchmarks/data/llm_samples.json` (hand-written "
             "samples) on this machine; numbers vary with load. Judge the outputs yourself.", "",
             f"- threads {result['threads']}, load average at start {result['load_average_at_start']}",
             "- peak RSS of the appliance with every default model loaded: "
             f"{result['appliance_consolidate']['peak_rss_mb']} MB",
             ""]
    c = result["appliance_consolidate"]
    lines += ["## Consolidation of the 40-message session (the whole appliance path)", "",
              f"{c['consolidate_seconds']} s{costs(c)}; key facts mentioned {c['mentioned']}/{c['key_facts']} "
              f"(missing: {', '.join(c['missing']) or 'none'})", "", "```text", str(c["summary"]), "```", ""]
    lines += ["## Summaries", ""]
    for s in result["summaries"]:
        lines += [f"### {s['id']} — {s['messages']} messages, {s['seconds']} s{costs(s)}, key facts {s['mentioned']}/"
                  f"{s['key_facts']} (missing: {', '.join(s['missing']) or 'none'})", "", f"**{s['title']}**", "",
                  "```text", s["summary"], "```", ""]
    lines += ["## Implication queries (edge discovery)", ""]
    for i in result["implications"]:
        lines += [f"- **{i['memory']}** ({i['seconds']} s): " + "; ".join(f"“{q}”" for q in i["queries"])]
    lines += ["", "## Query reformulation (graph-augmented recall)", ""]
    for r in result["reformulations"]:
        lines += [f"- “{r['query']}” ({r['seconds']} s) → " + "; ".join(f"“{a}”" for a in r["angles"])]
    d = result["dream"]
    lines += ["", "## Dream State assessment (one batch, before the guardrails)", "",
              f"{d['memories']} memories in {d['seconds']} s; proposed deprecations {d['proposed_deprecations']} "
              f"(expected {d['expected_deprecations']}: {d['correct_proposals']} right, {d['wrong_proposals']} "
              f"wrong); tags {d['tags']}; links {d['links']}", ""]
    return "\n".join(lines)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, help="a GGUF file (default: the installed default model)")
    parser.add_argument("--threads", type=int, default=0, help="0 = the appliance's default (every core but one)")
    parser.add_argument("--context", type=int, default=4096)
    parser.add_argument("--report", type=Path, help="also write a Markdown report here")
    parser.add_argument("--summaries-only", action="store_true",
                        help="only the consolidation and the summaries (the key-fact recall); no report")
    parser.add_argument("--no-drafts", action="store_true",
                        help="decode one token per model pass (the comparison for drafted decoding)")
    args = parser.parse_args()
    samples = json.loads(SAMPLES.read_text())
    model = open_model(args.model, args.context, args.threads)
    if args.no_drafts:
        model.draft_tokens = 0
    result: dict[str, Any] = {"model": model.model_id, "draft_tokens": model.draft_tokens,
                              "threads": model.threads or "default",
                              "load_average_at_start": [round(x, 2) for x in os.getloadavg()]}
    result["appliance_consolidate"] = appliance_consolidate(model, samples["sessions"][0])
    result["summaries"] = summaries(model, samples["sessions"][1:])
    if not args.summaries_only:
        result["implications"] = implications(model, samples["implications"])
        result["reformulations"] = reformulations(model, samples["reformulations"])
        result["dream"] = dream(model, samples["dream"])
    model.close()
    facts = [s for s in [result["appliance_consolidate"], *result["summaries"]]]
    result["key_fact_recall"] = round(sum(s["mentioned"] for s in facts) / sum(s["key_facts"] for s in facts), 3)
    print(json.dumps(result, indent=2, ensure_ascii=False))
    if args.report and not args.summaries_only:
        args.report.write_text(markdown(result), encoding="utf-8")


if __name__ == "__main__":
    main()
