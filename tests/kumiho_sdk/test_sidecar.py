"""The stock ``kumiho-mcp`` sidecar (kumiho 0.14.3 + kumiho-memory 1.6.4 from .venv-kumiho, unmodified), launched
over stdio as Revka's sub-agents launch it, driven by the official MCP client, with Revka's ``local_ce``
environment pointed at one real appliance: gRPC on the appliance's port (found by its local-CE probe), working
memory on the appliance's Redis-protocol listener, the LLM on the appliance's OpenAI-compatible endpoint. Every
memory tool succeeds, and what they write is visible through the appliance's own MCP tools and REST API."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import httpx
import pytest
from mcp.client.session import ClientSession
from mcp.client.stdio import StdioServerParameters, stdio_client

from appliance.inference.gguf_fixture import write_tiny_llama
from appliance.inference.install import chat_models, installed_path
from tests.appliance_process import free_port, serve
from tests.kumiho_sdk.conftest import Appliance
from tests.kumiho_sdk_env import sdk_env, sdk_python
from tests.mcp_api.clients import call, http_session
from tests.real_model import real_settings


def default_model() -> Path | None:
    """The real default chat model when `make models` placed it (make test does)."""
    settings = real_settings()
    return installed_path(settings, next(iter(chat_models())))


@pytest.fixture(scope="module")
def appliance(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Appliance]:
    """An appliance with everything the stock sidecar needs: its Redis-protocol listener on a free port and a chat
    model behind /v1: the real default model when installed, else the tiny random-weight GGUF (enough for every
    test here but the one that needs a model's real words)."""
    sdk_python()
    root = tmp_path_factory.mktemp("sidecar")
    model = default_model() or write_tiny_llama(root / "tiny.gguf")
    redis_port = free_port()
    with serve(root / "data", KUMIHO_CE_KUMIHO__REDIS_PORT=str(redis_port),
               KUMIHO_CE_INFERENCE__CHAT_MODEL="gguf", KUMIHO_CE_INFERENCE__MODEL_PATH=str(model),
               # the sidecar's summary asks for up to 2,560 tokens: minutes for a small model on a small machine
               KUMIHO_CE_INFERENCE__REQUEST_TIMEOUT_SECONDS="900",
               KUMIHO_CE_MAINTENANCE__IDLE_CONSOLIDATION_MINUTES="0") as running:
        yield Appliance(running, int(running.base_url.rsplit(":", 1)[1]), root, redis_port)
        running.stop()


def revka_local_ce_env(appliance: Appliance, home: Path) -> dict[str, str]:
    """What Revka's ``local_ce`` mode hands the stock sidecar: the local CE's gRPC endpoint, Redis working
    memory, an OpenAI-compatible LLM, and no token (a token sends the SDK to Kumiho's cloud)."""
    base = appliance.running.base_url
    models = httpx.get(f"{base}/v1/models", timeout=30)  # the chat model first, then the embedder
    model = models.json()["data"][0]["id"] if models.status_code == 200 and models.json().get("data") else "default"
    return sdk_env(home, None,
                   KUMIHO_LOCAL_SERVER_ENDPOINT=f"127.0.0.1:{appliance.port}",
                   KUMIHO_UPSTASH_REDIS_URL=f"redis://127.0.0.1:{appliance.redis_port}",
                   KUMIHO_LLM_PROVIDER="openai", KUMIHO_LLM_BASE_URL=f"{base}/v1", KUMIHO_LLM_API_KEY="dummy",
                   KUMIHO_LLM_MODEL=model, KUMIHO_LLM_LIGHT_MODEL=model,
                   KUMIHO_MEMORY_ARTIFACT_ROOT=str(home / "artifacts"))


@asynccontextmanager
async def sidecar(appliance: Appliance, home: Path) -> AsyncIterator[ClientSession]:
    params = StdioServerParameters(command=str(sdk_python()), args=["-m", "kumiho.mcp_server"],
                                   env=revka_local_ce_env(appliance, home), cwd=str(appliance.root))
    with open(appliance.root / f"{home.name}-sidecar.log", "a") as errlog:
        async with stdio_client(params, errlog=errlog) as (read, write), ClientSession(read, write) as session:
            await session.initialize()
            yield session


async def tool(session: ClientSession, name: str, **arguments: Any) -> dict[str, Any]:
    """A stock sidecar tool's JSON answer (its one text block); a handled failure there is ``{"error": …}``."""
    result = await session.call_tool(name, arguments)
    text = result.content[0].text  # type: ignore[union-attr]
    assert not result.is_error, f"{name}: {text}"
    payload = json.loads(text)
    assert "error" not in payload, f"{name}: {payload}"
    return payload  # type: ignore[no-any-return]


def run(steps: Any) -> Any:
    return anyio.run(steps)


async def ours(appliance: Appliance, name: str, **arguments: Any) -> dict[str, Any]:
    """One of the appliance's own MCP tools (HTTP /mcp), from inside a running event loop."""
    async with http_session(appliance.running.base_url) as session:
        return await call(session, name, **arguments)


def mcp(appliance: Appliance, name: str, **arguments: Any) -> dict[str, Any]:
    """One of the appliance's own MCP tools (HTTP /mcp), from synchronous test code."""
    return anyio.run(lambda: ours(appliance, name, **arguments))


def test_the_stock_sidecar_memory_flow_lands_in_the_appliance(appliance: Appliance) -> None:
    home = appliance.root / "revka-home"

    async def steps() -> dict[str, Any]:
        seen: dict[str, Any] = {}
        async with sidecar(appliance, home) as session:
            names = {t.name for t in (await session.list_tools()).tools}
            assert {"kumiho_memory_engage", "kumiho_memory_reflect", "kumiho_memory_store",
                    "kumiho_memory_retrieve", "kumiho_memory_ingest", "kumiho_memory_add_response",
                    "kumiho_memory_consolidate"} <= names
            seen["ingest"] = await tool(session, "kumiho_memory_ingest", user_id="alice", context="personal",
                                        message="We moved the staging database to db7 on Tuesday.")
            sid = seen["ingest"]["session_id"]
            seen["add_response"] = await tool(session, "kumiho_memory_add_response", session_id=sid,
                                              response="Noted: the staging database now runs on db7.")
            seen["buffer"] = await ours(appliance, "kumiho_chat_get", session_id=sid)
            seen["store"] = await tool(session, "kumiho_memory_store", space_path="infra",
                                       title="Staging database host",
                                       summary="The staging database runs on host db7 since Tuesday.",
                                       user_text="Where does the staging database run now?",
                                       assistant_text="On db7, since Tuesday.")
            seen["retrieve"] = await tool(session, "kumiho_memory_retrieve", query="staging database host",
                                          limit=5)
            seen["engage"] = await tool(session, "kumiho_memory_engage", query="where is the staging database")
            seen["reflect"] = await tool(
                session, "kumiho_memory_reflect", session_id=sid, response="I will use db7 from now on.",
                space_path="infra", discover_edges=False,
                captures=[{"type": "decision", "title": "Staging moves to db7",
                           "content": "The team decided to run the staging database on db7."},
                          {"type": "fact", "title": "Backups run at two",
                           "content": "Nightly backups of the staging database start at 02:00."}])
            seen["consolidate"] = await tool(session, "kumiho_memory_consolidate", session_id=sid,
                                             summary="Alice moved the staging database to db7 on Tuesday.")
            seen["buffer_after"] = await ours(appliance, "kumiho_chat_get", session_id=sid)
        return seen

    seen = run(steps)
    sid = seen["ingest"]["session_id"]
    assert seen["add_response"]["session_id"] == sid
    buffered = [m["content"] for m in seen["buffer"]["messages"]]
    assert buffered == ["We moved the staging database to db7 on Tuesday.",
                        "Noted: the staging database now runs on db7."], seen["buffer"]

    stored = seen["store"]
    assert stored["item_kref"].startswith("kref://CognitiveMemory/infra/") and "?r=" in stored["revision_kref"]
    assert stored["item_kref"] in seen["retrieve"]["item_krefs"], seen["retrieve"]
    assert seen["engage"]["count"] >= 1 and stored["revision_kref"] in seen["engage"]["source_krefs"], \
        seen["engage"]
    assert len(seen["reflect"]["stored_krefs"]) == 2, seen["reflect"]
    assert seen["consolidate"]["success"] is True, seen["consolidate"]
    summary_kref = seen["consolidate"]["store_result"]["revision_kref"]
    assert seen["buffer_after"]["messages"] == [], "consolidation empties the session's working memory"

    # the appliance's own doors see every write of the sidecar
    revision = mcp(appliance, "kumiho_get_revision", kref=stored["revision_kref"])
    assert revision["metadata"]["title"] == "Staging database host", revision
    # published is on the stored revision, or on a later one of the same item when a capture stacked onto it
    published = appliance.rest("/api/v1/revisions/by-kref", kref=stored["item_kref"], t="published")
    assert published["item_kref"] == stored["item_kref"] and published["number"] >= revision["number"], \
        (published, seen["reflect"])
    hits = mcp(appliance, "kumiho_fulltext_search", query="staging database host", context="CognitiveMemory")
    assert stored["item_kref"] in [hit["item"]["kref"] for hit in hits["results"]], hits
    for kref in [*seen["reflect"]["stored_krefs"], summary_kref]:
        assert appliance.rest("/api/v1/revisions/by-kref", kref=kref)["kref"] == kref
    summary = appliance.rest("/api/v1/revisions/by-kref", kref=summary_kref)
    assert "summarized" in summary["tags"] and "db7" in summary["metadata"]["summary"]


@pytest.mark.real_model
@pytest.mark.long
@pytest.mark.timeout(1200)
def test_the_stock_sidecar_consolidates_with_the_appliances_model(appliance: Appliance) -> None:
    """No summary given: the sidecar asks its LLM (the appliance's /v1/chat/completions, the local model) for the
    summary and the implications, with its own JSON schema. The tiny noise model cannot write a whole summary
    within the sidecar's token budget, so this one needs the real default model; it asks for up to 2,560 tokens,
    minutes on a small machine, hence a long test (`make test-sdk-long`) and a longer model deadline."""
    assert default_model() is not None, "the default chat model is not installed: run `make models`"
    home = appliance.root / "revka-llm"

    async def steps() -> dict[str, Any]:
        async with sidecar(appliance, home) as session:
            ingest = await tool(session, "kumiho_memory_ingest", user_id="bob",
                                message="We move the staging cluster from Frankfurt to Dublin on Tuesday.")
            sid = ingest["session_id"]
            await tool(session, "kumiho_memory_add_response", session_id=sid,
                       response="Noted. Anything to do before the move?")
            await tool(session, "kumiho_memory_ingest", user_id="bob", session_id=sid,
                       message="Priya renews the TLS certificates first; they expire on Friday.")
            return await tool(session, "kumiho_memory_consolidate", session_id=sid)

    calls_before = appliance.rest("/api/v1/model")["chat"].get("calls", 0)
    done = run(steps)
    assert done["success"] is True and done["buffer_was_empty"] is False, done
    assert appliance.rest("/api/v1/model")["chat"].get("calls", 0) > calls_before, "the local model was asked"
    kref = done["store_result"]["revision_kref"]
    revision = appliance.rest("/api/v1/revisions/by-kref", kref=kref)
    assert "summarized" in revision["tags"] and revision["metadata"]["summary"]
