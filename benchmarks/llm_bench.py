"""The local chat model on this machine: load time, prompt and generation speed, peak memory (JSON).

    python benchmarks/llm_bench.py                    # the installed default model (make models)
    python benchmarks/llm_bench.py --model my.gguf    # any GGUF

Three calls through ``LlamaModel`` (the appliance's own code path, capacity slot and deadline watch
included): a small schema-constrained call (the ``json_smoke`` prompt), a summary of a ~40-message chat with a
bounded schema, and consolidation's own summary call (``consolidation.summarize``) of the 40-message sample
session of ``benchmarks/data/llm_samples.json``. Speeds come from llama.cpp's own counters for each call;
the tokens read and generated and the model passes (``decoding_steps``: drafted decoding checks several
tokens a pass) do not depend on the machine's load. ``--no-drafts`` decodes one token a pass (the comparison).
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from appliance.config import load_settings
from appliance.inference import prompts
from appliance.inference.install import chat_models, installed_path
from appliance.inference.llm import SMOKE_SCHEMA, LlamaModel, default_threads

SAMPLES = Path(__file__).with_name("data") / "llm_samples.json"
SUMMARY_SCHEMA = {
    "type": "object",
    "properties": {
        "title": {"type": "string", "minLength": 1, "maxLength": 80},
        "summary": {"type": "string", "minLength": 1, "maxLength": 400},
        "topics": {"type": "array", "maxItems": 4, "items": {"type": "string", "maxLength": 30}},
        "facts": {"type": "array", "maxItems": 4, "items": {"type": "string", "maxLength": 120}},
    },
    "required": ["title", "summary", "topics", "facts"],
    "additionalProperties": False,
}

TURNS = [
    ("user", "We are moving the staging cluster from Frankfurt to Dublin next Tuesday."),
    ("assistant", "Noted. Do you want the database replicas moved first or together with the app servers?"),
    ("user", "Replicas first, on Monday evening; Priya owns the runbook."),
    ("assistant", "I will draft a checklist for Priya with the replica cut-over steps."),
    ("user", "Also the TLS certificates expire on the 14th, renew them before the move."),
    ("assistant", "Understood: renew the certificates before Tuesday, then move replicas on Monday evening."),
    ("user", "The budget for the move is capped at 2,000 euros, mostly for the overlap of both regions."),
    ("assistant", "I will keep the overlap window short, two days at most, to stay within the cap."),
]


def conversation() -> list[dict[str, str]]:
    lines = [f"{role}: {text}" for _ in range(5) for role, text in TURNS]  # 40 messages
    return [{"role": "system", "content": "You summarise conversations for a memory store. Answer with JSON only."},
            {"role": "user", "content": "Conversation:\n" + "\n".join(lines) +
             "\n\nSummarise it: a title, a two-sentence summary, the topics, and the key facts."}]


def rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def measured_call(model: LlamaModel, messages: list[dict[str, str]], schema: dict, max_tokens: int) -> dict:
    from llama_cpp import llama_cpp

    ctx = model._llm._ctx.ctx
    llama_cpp.llama_perf_context_reset(ctx)
    started = time.perf_counter()
    answer = model.complete_json(messages, schema, max_tokens=max_tokens, timeout=600)
    seconds = time.perf_counter() - started
    perf = llama_cpp.llama_perf_context(ctx)
    generated = perf.n_eval + 1  # the last token is sampled but never decoded
    return {
        "seconds": round(seconds, 2),
        "prompt_tokens": perf.n_p_eval,
        "prompt_tok_per_s": round(perf.n_p_eval / (perf.t_p_eval_ms / 1000), 1) if perf.t_p_eval_ms else None,
        "generated_tokens": generated,
        "decode_tok_per_s": round(perf.n_eval / (perf.t_eval_ms / 1000), 1) if perf.t_eval_ms else None,
        # everything after the prompt: decoding, sampling, the grammar, Python
        "generation_tok_per_s": round(generated / (seconds - perf.t_p_eval_ms / 1000), 1),
        "answer": answer,
    }


def consolidation_summary(model: LlamaModel) -> dict:
    """Consolidation's summary call on the 40-message sample session (redacted as consolidation does)."""
    from appliance.memory import consolidation
    from appliance.memory.model_options import patterns_only
    from benchmarks.llm_quality import call_costs  # here: llm_quality imports this module

    session = json.loads(SAMPLES.read_text())["sessions"][0]
    texts = patterns_only([m["content"] for m in session["messages"]])
    started = time.perf_counter()
    consolidation.summarize(model, [(m["role"], t) for m, t in zip(session["messages"], texts, strict=True)],
                            timeout=1800)
    return {"messages": len(session["messages"]), "seconds": round(time.perf_counter() - started, 2),
            **call_costs(model)}


def open_model(path: Path | None, context: int, threads: int) -> LlamaModel:
    """``path``, or the installed default model (verified by its manifest's sha256)."""
    if path:
        return LlamaModel(path, context_tokens=context, threads=threads)
    name, entry = next(iter(chat_models().items()))
    installed = installed_path(load_settings(), name)
    if installed is None:
        sys.exit(f"{name} is not installed: run `make models` (or pass --model)")
    return LlamaModel(installed, model_id=name, sha256=entry["sha256"], size=entry["size"], context_tokens=context,
                      threads=threads)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--model", type=Path, help="a GGUF file (default: the installed default model)")
    parser.add_argument("--threads", type=int, default=0, help="0 = the appliance's default (every core but one)")
    parser.add_argument("--context", type=int, default=4096)
    parser.add_argument("--no-drafts", action="store_true", help="decode one token per model pass")
    args = parser.parse_args()
    model = open_model(args.model, args.context, args.threads)
    if args.no_drafts:
        model.draft_tokens = 0
    load_average = [round(x, 2) for x in os.getloadavg()]  # other work on the machine skews every number
    baseline = rss_mb()
    started = time.perf_counter()
    model.load(timeout=600)
    load_seconds = time.perf_counter() - started  # includes the one-time sha256 check
    smoke = measured_call(model, prompts.render("json_smoke", text="Alice moved the staging cluster to Dublin "
                                                "on Tuesday; Priya owns the runbook and the budget is 2,000 euros."),
                          SMOKE_SCHEMA, 96)
    summary = measured_call(model, conversation(), SUMMARY_SCHEMA, 320)
    consolidation_call = consolidation_summary(model)
    print(json.dumps({
        "load_average_at_start": load_average,
        "model": model.model_id, "threads": args.threads or default_threads(), "context": args.context,
        "load_seconds_with_sha256": round(load_seconds, 2), "load_seconds": model.status().load_seconds,
        "rss_before_load_mb": round(baseline), "peak_rss_mb": round(rss_mb()),
        "draft_tokens": model.draft_tokens, "json_smoke": smoke, "summary_40_messages": summary,
        "consolidation_40_messages": consolidation_call,
    }, indent=2, ensure_ascii=False))
    model.close()


if __name__ == "__main__":
    main()
