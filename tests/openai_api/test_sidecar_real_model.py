"""The stock Kumiho sidecar's own summarizer (``kumiho_memory.summarization.MemorySummarizer``, run unmodified
in the SDK's separate environment) against the appliance's OpenAI-compatible endpoint on the real default
model, configured only by the environment the sidecar reads (``KUMIHO_LLM_*``): its summary call (a system
prompt, max_tokens 2560, ``response_format`` json_schema strict with its own schema) and its implications call
(the light model name) succeed, and the summary names the conversation's facts. One conversation: CI runs it on
2 cores."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.inprocess import InProcess, serve_in_process
from tests.kumiho_sdk_env import sdk_python
from tests.openai_api.conftest import QUIET
from tests.real_model import default_model

pytestmark = pytest.mark.real_model
ROOT = Path(__file__).resolve().parents[2]

CONVERSATION = [
    {"role": "user", "content": "We move the staging cluster from Frankfurt to Dublin on Tuesday."},
    {"role": "assistant", "content": "Noted. Anything to do before the move?"},
    {"role": "user", "content": "Priya renews the TLS certificates first; they expire on Friday."},
]

SIDECAR = """
import asyncio, json, sys
from kumiho_memory.summarization import MemorySummarizer

messages = json.loads(sys.argv[1])
summarizer = MemorySummarizer()  # provider, base URL, key and model names from KUMIHO_LLM_*

async def main():
    summary = await summarizer.summarize_conversation(messages, strict=True)  # strict: an error raises
    implications = await summarizer.generate_implications(messages)
    return {"summary": summary, "implications": implications, "model": summarizer.model,
            "light_model": summarizer.light_model, "usage": summarizer.adapter.last_usage}

print(json.dumps(asyncio.run(main())))
"""


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcess]:
    model = default_model()
    with serve_in_process(tmp_path_factory.mktemp("sidecar-llm") / "data", model, maintenance=QUIET) as running:
        yield running


def test_the_sidecars_summarizer_runs_on_the_local_model(app: InProcess) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("KUMIHO_", "OPENAI_"))}
    env.update({"KUMIHO_LLM_PROVIDER": "openai", "KUMIHO_LLM_BASE_URL": app.base_url + "/v1",
                "KUMIHO_LLM_API_KEY": "sk-local-dummy", "KUMIHO_LLM_MODEL": "gpt-4o",
                "KUMIHO_LLM_LIGHT_MODEL": "gpt-4o-mini"})
    done = subprocess.run([str(sdk_python()), "-c", SIDECAR, json.dumps(CONVERSATION)], env=env, capture_output=True,
                          text=True, timeout=280, cwd=ROOT)
    assert done.returncode == 0, f"stdout: {done.stdout[-3000:]}\nstderr: {done.stderr[-3000:]}"
    result = json.loads(done.stdout.strip().splitlines()[-1])
    print(json.dumps(result)[:3000], file=sys.stderr)  # what the small model made of it, for the log
    summary = result["summary"]
    assert "error" not in summary, summary  # the sidecar's fallback summary carries an error; this one is the model's
    assert summary["summary"] and summary["title"] and isinstance(summary["knowledge"]["facts"], list)
    words = json.dumps(summary).lower()
    assert any(w in words for w in ("dublin", "frankfurt", "staging", "tls", "certificate", "priya")), summary
    assert result["usage"]["completion_tokens"] > 0 and result["usage"]["prompt_tokens"] > 0
    assert isinstance(result["implications"], list)
    assert app.services.model.status().calls >= 2  # both calls ran on the appliance's own model instance
