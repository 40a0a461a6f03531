"""The OpenAI-compatible endpoint's cost over the in-process call (JSON).

    python benchmarks/openai_bench.py                 # the tiny random-weight GGUF: the HTTP path's own cost
    python benchmarks/openai_bench.py --real          # the installed default model (make models)

The same small schema-constrained call (the ``json_smoke`` prompt and its schema) made, in alternation, on the
model instance in this process (``LlamaModel.complete``: what the appliance's memory work pays) and through
``POST /v1/chat/completions`` of the real app behind uvicorn with the official ``openai`` client (what the
stock sidecar pays: HTTP, parsing and bounding the body, the schema checks, the thread hop). Greedy, so both
paths generate the same tokens; the prompt is the same each time, so both reuse the model's KV cache alike.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from openai import OpenAI

from appliance.admin_api.openai_calls import local_model
from appliance.config import load_settings
from appliance.inference import prompts
from appliance.inference.gguf_fixture import write_tiny_llama
from appliance.inference.install import chat_models, installed_path
from appliance.inference.llm import SMOKE_SCHEMA, LlamaModel
from tests.inprocess import serve_in_process

TEXT = "Priya moves the staging cluster from Frankfurt to Dublin on Tuesday; the TLS certificates must be renewed."


def _model(real: bool, root: Path) -> LlamaModel:
    if not real:
        return LlamaModel(write_tiny_llama(root / "tiny.gguf"), model_id="tiny", context_tokens=1024, threads=1)
    name, entry = next(iter(chat_models().items()))
    path = installed_path(load_settings(), name)
    if path is None:
        sys.exit(f"{name} is not installed: run `make models`")
    return LlamaModel(path, model_id=name, sha256=entry["sha256"], size=entry["size"])


def _percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(share * len(ordered)))]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--real", action="store_true", help="the installed default model instead of the tiny one")
    parser.add_argument("--rounds", type=int, default=0, help="calls per path (default: 30 tiny, 5 real)")
    args = parser.parse_args()
    rounds = args.rounds or (5 if args.real else 30)
    messages = prompts.render("json_smoke", text=TEXT)
    response_format = {"type": "json_schema", "json_schema": {"name": "smoke", "schema": SMOKE_SCHEMA,
                                                              "strict": True}}
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        with serve_in_process(root / "data", _model(args.real, root),
                              maintenance={"idle_consolidation_minutes": 0, "dream_state_time": ""}) as app, \
                OpenAI(base_url=app.base_url + "/v1", api_key="local", max_retries=0, timeout=600) as client:
            model = local_model(app.services.model)
            assert isinstance(model, LlamaModel)
            model.load()
            times: dict[str, list[float]] = {"in_process": [], "endpoint": []}
            tokens: dict[str, int] = {}
            for _ in range(rounds):
                started = time.perf_counter()
                done = model.complete(messages, schema=SMOKE_SCHEMA, max_tokens=96)
                times["in_process"].append(time.perf_counter() - started)
                started = time.perf_counter()
                answer = client.chat.completions.create(model="gpt-4o-mini", messages=messages,  # type: ignore[arg-type]
                                                        max_tokens=96, response_format=response_format)  # type: ignore[arg-type]
                times["endpoint"].append(time.perf_counter() - started)
                assert answer.choices[0].message.content == done.text  # greedy: the same answer either way
                tokens = {"prompt": done.prompt_tokens, "answer": done.completion_tokens}
    figures = {path: {"p50_ms": round(statistics.median(values) * 1000, 2),
                      "p95_ms": round(_percentile(values, 0.95) * 1000, 2)} for path, values in times.items()}
    overhead = [(b - a) * 1000 for a, b in zip(times["in_process"], times["endpoint"], strict=True)]
    print(json.dumps({"openai_endpoint": {
        "model": "default (real)" if args.real else "tiny random-weight GGUF", "rounds": rounds, "tokens": tokens,
        **figures, "overhead_p50_ms": round(statistics.median(overhead), 2)}}, sort_keys=True))


if __name__ == "__main__":
    main()
