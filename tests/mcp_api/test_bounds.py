"""Bounds on every tool input, and hostile input written by hand, through the real MCP server over real HTTP:
a request too large for one transaction is refused before anything is written; huge strings, deep JSON,
huge numbers, lone surrogates, control characters, path tricks and invalid krefs get a clear error naming
the field and the limit, never a 5xx, an internal error or internal text, and leave the stores unchanged."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest

from appliance.core import names
from appliance.errors import InvalidArgument
from appliance.graph import GraphStore
from appliance.mcp_api.catalogue import tools
from appliance.memory.writer import MAX_EDGES_PER_WRITE, MAX_MEMORIES_PER_WRITE
from appliance.operations.validation import MAX_DEPTH, largest_request, parse
from tests.inprocess import InProcess, serve_in_process
from tests.mcp_api.hostile import Answer, RawMcp, snapshot

KREF = "kref://CognitiveMemory/notes/source-{}.conversation?r=1"


@pytest.fixture(scope="module")
def app(tmp_path_factory: pytest.TempPathFactory) -> Iterator[InProcess]:
    with serve_in_process(tmp_path_factory.mktemp("bounds") / "data", None) as running:
        yield running


@pytest.fixture
def mcp(app: InProcess) -> Iterator[RawMcp]:
    client = RawMcp(app.base_url)
    yield client
    client.close()


def refused(app: InProcess, mcp: RawMcp, tool: str, arguments: Any) -> dict[str, Any]:
    """The call's error, after checking that it changed nothing."""
    before = snapshot(app)
    answer = mcp.call(tool, arguments)
    assert answer.payload is not None and "error" in answer.payload, answer.text[:500]
    assert snapshot(app) == before, "a refused call changed the stores"
    return answer.payload["error"]  # type: ignore[no-any-return]


# -- the catalogue ---------------------------------------------------------------------------------------
def _unbounded(schema: dict[str, Any], path: str) -> list[str]:
    kinds = schema.get("type")
    kinds = kinds if isinstance(kinds, list) else [kinds]
    missing = []
    if "enum" not in schema:
        if "string" in kinds and "maxLength" not in schema:
            missing.append(f"{path}: maxLength")
        if "array" in kinds and "maxItems" not in schema:
            missing.append(f"{path}: maxItems")
        if {"integer", "number"} & set(kinds) and not {"minimum", "maximum"} <= set(schema):
            missing.append(f"{path}: minimum/maximum")
        if "object" in kinds and "maxProperties" not in schema and schema.get("additionalProperties") is not False:
            missing.append(f"{path}: maxProperties")
    for key, child in schema.get("properties", {}).items():
        missing += _unbounded(child, f"{path}.{key}")
    if "items" in schema:
        missing += _unbounded(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        missing += _unbounded({"type": ["string", "array", "object"], **schema["additionalProperties"]},
                              f"{path}.*")
    return missing


def test_every_input_of_every_tool_has_a_bound() -> None:
    missing = [m for name, spec in tools().items() for m in _unbounded(spec.input_schema, name)]
    assert missing == []


def test_the_largest_valid_call_of_any_tool_is_far_below_the_request_limit() -> None:
    # 512 Ki characters: ≤ 2 MiB of UTF-8 even in 4-byte characters, ≤ 3 MiB with every character escaped
    sizes = {name: largest_request(spec.input_schema) for name, spec in tools().items()}
    assert max(sizes.values()) <= 512 * 1024, sizes
    reflect = tools()["kumiho_memory_reflect"].input_schema["properties"]
    assert reflect["captures"]["maxItems"] == MAX_MEMORIES_PER_WRITE


# -- defect: one reflect held the writer for 44 s and a larger one exhausted memory ---------------------
def test_a_reflect_writing_too_many_edges_is_refused_before_anything_is_written(app: InProcess,
                                                                                mcp: RawMcp) -> None:
    captures = [{"type": "fact", "title": f"Fact {i}", "content": f"Fact number {i} of a large reflect."}
                for i in range(MAX_MEMORIES_PER_WRITE)]
    sources = [KREF.format(i) for i in range(MAX_EDGES_PER_WRITE // MAX_MEMORIES_PER_WRITE + 1)]
    error = refused(app, mcp, "kumiho_memory_reflect", {"session_id": "s-big", "response": "Noted, all of it.",
                                                        "captures": captures, "source_krefs": sources})
    assert error["code"] == "invalid_argument" and error["field"] == "source_krefs"
    assert f"at most {MAX_EDGES_PER_WRITE}" in error["message"] and "split" in error["message"]
    assert app.services.working.count("CognitiveMemory", "s-big") == 0  # the response was not buffered either


def test_a_reflect_of_too_many_captures_names_the_field_and_the_bound(app: InProcess, mcp: RawMcp) -> None:
    captures = [{"type": "fact", "title": "t", "content": "c"}] * (MAX_MEMORIES_PER_WRITE + 1)
    error = refused(app, mcp, "kumiho_memory_reflect", {"session_id": "s", "response": "r", "captures": captures})
    assert error["field"] == "captures"
    assert error["message"] == (f"captures: at most {MAX_MEMORIES_PER_WRITE} items (got "
                                f"{MAX_MEMORIES_PER_WRITE + 1}); send fewer, or split the call in several")


def test_the_largest_allowed_reflect_is_written_whole(app: InProcess, mcp: RawMcp) -> None:
    stored = [mcp.call("kumiho_memory_store", {"user_text": f"Source memory {i} for the reflect bound."})
              for i in range(MAX_EDGES_PER_WRITE // MAX_MEMORIES_PER_WRITE)]
    sources = [s.payload["revision_kref"] for s in stored if s.payload]
    captures = [{"type": "fact", "title": f"Bound fact {i}", "content": f"Bound fact {i}."}
                for i in range(MAX_MEMORIES_PER_WRITE)]
    before = app.services.graph.stats()["edges"]
    answer = mcp.call("kumiho_memory_reflect", {"session_id": "s-max", "response": "ok", "captures": captures,
                                                "source_krefs": sources, "discover_edges": False})
    assert answer.payload and answer.payload["captures_stored"] == MAX_MEMORIES_PER_WRITE, answer.text[:300]
    assert app.services.graph.stats()["edges"] - before == MAX_EDGES_PER_WRITE


# -- defect: multi-megabyte glob patterns took seconds each and stayed cached ----------------------------
def test_a_huge_glob_is_refused_by_length_without_being_compiled(app: InProcess, mcp: RawMcp) -> None:
    pattern = "*a" * 2_000_000  # ~3.8 MiB, the size that took 7-19 s
    error = refused(app, mcp, "memory_search", {"context_filter": pattern})
    assert error["field"] == "context_filter"
    assert error["message"].startswith("context_filter: at most 256 characters (got 4000000)")


def test_a_glob_of_many_wildcards_is_refused_by_the_graph_itself(graph: GraphStore) -> None:
    with pytest.raises(InvalidArgument) as caught:
        graph.search_items(name_filter="*a" * (names.MAX_WILDCARDS + 1))
    assert caught.value.field == "name_filter" and f"at most {names.MAX_WILDCARDS} wildcards" in caught.value.message
    with pytest.raises(InvalidArgument, match="context_filter: at most 256 characters"):
        graph.search_items(context_filter="p" * 257)
    assert graph.search_items(context_filter="*/notes/*", name_filter="hero*").items == []


def test_a_glob_within_the_bounds_still_matches(app: InProcess, mcp: RawMcp) -> None:
    mcp.call("memory_store", {"title": "Hero of the glob", "user_text": "A glob finds me.", "space_path": "globs"})
    answer = mcp.call("memory_search", {"context_filter": "CognitiveMemory/glob*", "name_filter": "hero*"})
    assert answer.payload and answer.payload["count"] == 1, answer.text[:300]


# -- huge strings, numbers, deep JSON -------------------------------------------------------------------
def test_a_huge_string_is_refused_with_the_bound_and_a_short_message(app: InProcess, mcp: RawMcp) -> None:
    error = refused(app, mcp, "kumiho_memory_store", {"user_text": "x" * 1_000_000})
    assert error == {"code": "invalid_argument", "field": "user_text",
                     "message": "user_text: at most 65536 characters (got 1000000); shorten it"}


@pytest.mark.parametrize("value", [10**400, -(10**400), 2**63, 1e300], ids=["1e400", "-1e400", "2^63", "1e300"])
def test_a_huge_number_is_refused_with_the_range(app: InProcess, mcp: RawMcp, value: Any) -> None:
    error = refused(app, mcp, "kumiho_memory_recall", {"query": "anything", "limit": value})
    assert error["field"] == "limit"
    assert error["message"].startswith(("limit: give a number from 1 to 1000", "limit: expected integer",
                                        "limit: a number of more than 19 digits"))


def test_a_5000_digit_number_is_refused_cleanly(app: InProcess, mcp: RawMcp) -> None:
    before = snapshot(app)
    body = ('{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "kumiho_memory_recall", '
            '"arguments": {"query": "q", "limit": 1' + "0" * 5000 + "}}}")
    answer = mcp.post(body.encode())
    assert answer.status == 400 and "Parse error" in answer.text  # the JSON-RPC layer refuses it
    assert snapshot(app) == before
    # had it come through, the schema validator's message would print it (ValueError in Python 3.11)
    with pytest.raises(InvalidArgument, match="limit: a number of more than 19 digits"):
        parse(tools()["kumiho_memory_recall"], {"query": "q", "limit": 10**5000})


def test_metadata_nested_too_deep_is_refused_naming_the_field(app: InProcess, mcp: RawMcp) -> None:
    deep: Any = "leaf"
    for _ in range(MAX_DEPTH + 5):
        deep = {"k": deep}
    error = refused(app, mcp, "kumiho_memory_store", {"user_text": "deep", "metadata": {"nested": deep}})
    assert error["field"].startswith("metadata.nested.k")
    assert f"nested deeper than {MAX_DEPTH} levels" in error["message"]


@pytest.mark.parametrize("depth", [1_000, 100_000])
def test_arguments_nested_100000_levels_deep_are_refused_cleanly(app: InProcess, mcp: RawMcp, depth: int) -> None:
    before = snapshot(app)
    body = ('{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "kumiho_memory_store", '
            '"arguments": {"user_text": "deep", "metadata": {"m": ' + "[" * depth + "]" * depth + "}}}}")
    answer = mcp.post(body.encode())
    assert answer.refused
    assert snapshot(app) == before


def test_metadata_values_are_bounded_once_encoded(app: InProcess, mcp: RawMcp) -> None:
    error = refused(app, mcp, "kumiho_memory_store", {"user_text": "meta", "metadata": {"list": ["x" * 100] * 60}})
    assert error["field"] == "metadata.list" and "at most 4096 characters" in error["message"]
    too_many = {f"k{i}": "v" for i in range(33)}
    assert refused(app, mcp, "kumiho_memory_store", {"user_text": "m", "metadata": too_many})["message"] == (
        "metadata: at most 32 keys (got 33); send fewer")


def test_a_summary_object_is_bounded(app: InProcess, mcp: RawMcp) -> None:
    mcp.call("kumiho_memory_add_response", {"session_id": "s-sum", "response": "Something to consolidate."})
    summary = {"summary": "A summary.", "knowledge": {"facts": ["f" * 4000] * 20}}
    error = refused(app, mcp, "kumiho_memory_consolidate", {"session_id": "s-sum", "summary": summary})
    assert error["field"] == "summary" and "65536 characters" in error["message"]


# -- defects the fuzz found: refused calls that had already touched the working memory -------------------
def test_an_ingest_too_large_for_the_working_memory_mints_no_session(app: InProcess, mcp: RawMcp) -> None:
    message = "é" * 40_000  # within the schema's 65536 characters, but 80,000 bytes of UTF-8
    error = refused(app, mcp, "kumiho_memory_ingest", {"user_id": "u-big", "message": message})
    assert error["field"] == "message" and "80000 bytes of UTF-8; the limit is 65536" in error["message"]
    error = refused(app, mcp, "kumiho_memory_add_response", {"user_id": "u-big", "response": message})
    assert error["field"] == "response"


def test_consolidating_a_user_without_a_session_creates_none(app: InProcess, mcp: RawMcp) -> None:
    error = refused(app, mcp, "kumiho_memory_consolidate", {"user_id": "u-nobody"})
    assert error["code"] == "conflict" and error["field"] == "user_id"
    assert error["message"].startswith("No messages to consolidate for user_id 'u-nobody'")


@pytest.mark.parametrize("summary", [{"title": "no summary field"}, "   "], ids=["object", "blank"])
def test_consolidating_with_an_unusable_summary_mints_no_session(app: InProcess, mcp: RawMcp, summary: Any) -> None:
    user = f"u-summary-{type(summary).__name__}"  # one each: a user's second call would find the first's session
    error = refused(app, mcp, "kumiho_memory_consolidate", {"user_id": user, "summary": summary})
    assert error["field"] == "summary"


def test_a_reflect_revising_a_missing_memory_buffers_nothing(app: InProcess, mcp: RawMcp) -> None:
    capture = {"type": "correction", "title": "Fixed", "content": "The port is 7444.",
               "revises": "kref://CognitiveMemory/notes/missing.conversation"}
    error = refused(app, mcp, "kumiho_memory_reflect", {"session_id": "s-rev", "response": "Corrected the port.",
                                                        "captures": [capture]})
    assert error["code"] == "not_found" and error["field"] == "revises"


def test_the_same_execution_stored_twice_is_stored_twice(app: InProcess, mcp: RawMcp) -> None:
    # The second write found its item already in the bundle and failed inside the graph transaction; after
    # that rollback, Kùzu answered later writes with "write-write conflict" and once crashed the process.
    execution = {"task": "run the nightly export", "exit_code": 3, "stderr": "disk full", "topics": ["exports"]}
    memory = {"user_text": "The export runs nightly.", "bundle_name": "exports", "stack_revisions": False}
    answers = [mcp.call("kumiho_memory_store_execution", execution) for _ in range(3)]
    answers += [mcp.call("kumiho_memory_store", memory) for _ in range(3)]
    assert all(a.payload and not a.refused for a in answers), [a.text[:200] for a in answers if a.refused]
    revisions = {a.payload["store_result"]["revision_kref"] for a in answers[:3] if a.payload}
    assert len(revisions) == 3  # three revisions of the one item
    assert mcp.call("kumiho_memory_store", {"user_text": "A later write still works."}).payload["stored"]


@pytest.mark.parametrize(("field", "bad"), [
    ("tags", {"tags": ["fine", "bad\x00tag"]}), ("memory_item_kind", {"memory_item_kind": "two words"}),
    ("metadata.key", {"metadata": {"key\x01": "v"}}), ("artifact_name", {"artifact_name": "../x"}),
    ("edge_type", {"edge_type": "lower", "source_revision_krefs": [KREF.format(0)]})])
def test_a_write_the_graph_would_refuse_halfway_is_refused_before_it_starts(app: InProcess, mcp: RawMcp,
                                                                             field: str, bad: dict[str, Any]) -> None:
    # Refused inside the transaction, after the revision was written, the rollback left Kùzu answering every
    # later write to the same item with "write-write conflict" (storage_error) for good.
    text = f"The same memory, stored again after a refused write ({field})."
    first = mcp.call("kumiho_memory_store", {"user_text": text, "stack_revisions": False})
    assert first.payload and first.payload["stored"], first.text[:300]
    for _ in range(2):
        error = refused(app, mcp, "kumiho_memory_store", {"user_text": text, "stack_revisions": False, **bad})
        assert error["code"] == "invalid_argument" and error["field"].startswith(field), error
        again = mcp.call("kumiho_memory_store", {"user_text": text, "stack_revisions": False})
        assert again.payload and again.payload.get("stored"), again.text[:300]
        assert again.payload["item_kref"] == first.payload["item_kref"]


def test_a_project_name_too_long_for_a_directory_is_refused(app: InProcess, mcp: RawMcp) -> None:
    # 128 characters, but 256 bytes of UTF-8: the artifacts directory could not be created (internal error)
    for tool, arguments in (("memory_store", {"title": "t", "project": "é" * 128}),
                            ("memory_reflect", {"session_id": "s-p", "response": "", "project": "é" * 128,
                                                "captures": [{"type": "fact", "title": "t", "content": "c"}]})):
        error = refused(app, mcp, tool, arguments)
        assert error["code"] == "invalid_argument" and "255 bytes of UTF-8" in error["message"], error


def test_a_session_context_too_long_for_a_minted_id_is_refused(app: InProcess, mcp: RawMcp) -> None:
    # the id minted from it ("<context>:user-<hash>:<day>:<n>") broke the 256-character limit after the
    # user's active-session pointer had been claimed
    error = refused(app, mcp, "kumiho_memory_add_response", {"user_id": "u-ctx", "context": "c" * 256,
                                                             "response": "A response."})
    assert error["field"] == "context" and "at most 200 characters" in error["message"]


def test_an_error_never_quotes_a_huge_value_whole(app: InProcess, mcp: RawMcp) -> None:
    error = refused(app, mcp, "kumiho_memory_dream_state", {"dry_run": True, "model": "é" * 4096})
    assert error["field"] == "model" and len(error["message"]) <= 500 and "é" * 61 not in error["message"]


def test_a_long_error_message_is_cut_to_its_bound() -> None:
    from appliance.mcp_api.server import MAX_ERROR_MESSAGE, _clipped

    clipped = _clipped({"code": "invalid_argument", "message": "x" * 5000, "field": "f"})
    assert len(clipped["message"]) == MAX_ERROR_MESSAGE and clipped["message"].endswith("…")
    assert clipped["field"] == "f" and _clipped({"message": "short"}) == {"message": "short"}


# -- hostile text ---------------------------------------------------------------------------------------
HOSTILE_TEXT = ["\ud800", "a\udfffb", "\x00", "nul\x00inside", "\x1b[2J\x07", "\u202eevil", "../../etc/passwd",
                "²", "٣٤", "１２", "C:\\Windows\\system32", "\ufeff", "🦊"]


@pytest.mark.parametrize("text", HOSTILE_TEXT, ids=repr)
def test_hostile_text_in_every_kind_of_field_gets_a_clean_answer(app: InProcess, mcp: RawMcp, text: str) -> None:
    calls = [
        ("kumiho_memory_store", {"user_text": f"note {text}", "title": text, "space_path": text, "tags": [text],
                                 "metadata": {text or "k": text}}),
        ("kumiho_memory_store", {"user_text": f"note {text} again", "space_hint": text, "bundle_name": text}),
        ("kumiho_memory_store", {"user_text": "text", "project": text}),
        ("kumiho_memory_store", {"user_text": "text", "artifact_location": text, "artifact_name": text}),
        ("kumiho_memory_reflect", {"session_id": text, "response": text,
                                   "captures": [{"type": "fact", "title": text, "content": text, "revises": text}]}),
        ("kumiho_memory_ingest", {"user_id": text, "message": text, "context": text}),
        ("kumiho_memory_add_response", {"session_id": text, "response": text}),
        ("kumiho_memory_consolidate", {"session_id": text, "summary": text}),
        ("kumiho_memory_engage", {"query": text, "space_paths": [text], "memory_types": [text]}),
        ("kumiho_memory_retrieve", {"query": text, "mode": text, "bundle_names": [text], "project": text}),
        ("kumiho_fulltext_search", {"query": text, "context": text, "kind": text}),
        ("memory_search", {"context_filter": text, "name_filter": text, "kind_filter": text}),
        ("memory_graph", {"project": text, "space": text, "kinds": text, "search": text}),
        ("kumiho_resolve_kref", {"kref": text}),
        ("kumiho_get_edges", {"revision_kref": f"kref://CognitiveMemory/{text}", "edge_type": text}),
        ("kumiho_create_edge", {"source_kref": f"kref://CognitiveMemory/{text}", "target_kref": text,
                                "edge_type": "REFERENCED", "metadata": {text or "k": text}}),
        ("kumiho_find_path", {"source_kref": text, "target_kref": text, "edge_types": [text]}),
        ("kumiho_deprecate_item", {"item_kref": f"kref://{text}/x.conversation"}),
        ("kumiho_get_revision_by_tag", {"item_kref": "kref://CognitiveMemory/notes/x.conversation", "tag": text}),
        ("kumiho_memory_store_execution", {"task": text, "stdout": text, "stderr": text, "tools": [text]}),
        ("kumiho_memory_dream_state", {"dry_run": True, "model": text, "base_url": text}),
        ("kumiho_memory_discover_edges", {"revision_kref": text, "summary": text, "edge_type": text}),
    ]
    for tool, arguments in calls:
        before = snapshot(app)
        answer = mcp.call(tool, arguments)
        if answer.refused:
            assert snapshot(app) == before, (tool, text, answer.text[:300])


INVALID_KREFS = ["", "kref://", "kref:///", "kref://a//b", "kref://a/b.c?r=0", "kref://a/b.c?r=-1", "kref://a/b.c?r=²",
                 "kref://a/b.c?r=99999999999999999999999", "kref://../../etc/passwd", "http://example.com",
                 "kref://a/b.c?a=../../x", "kref://a/b.c?r=1&a=", "kref://a/b c.d", "kref://a/b.c#frag"]


@pytest.mark.parametrize("kref", INVALID_KREFS)
def test_invalid_krefs_are_refused_naming_the_field(app: InProcess, mcp: RawMcp, kref: str) -> None:
    for tool, field in (("kumiho_resolve_kref", "kref"), ("memory_get_item", "kref"),
                        ("kumiho_get_edges", "revision_kref"), ("kumiho_get_dependencies", "revision_kref"),
                        ("kumiho_deprecate_item", "item_kref"),
                        ("kumiho_get_revision_by_tag", "item_kref")):
        error = refused(app, mcp, tool, {field: kref})
        assert error["code"] in ("invalid_kref", "invalid_argument", "not_found", "ambiguous_kref"), error


@pytest.mark.parametrize("bad", [1, None, [], {}, True, 1.5], ids=repr)
def test_wrong_types_name_the_field_and_the_expected_type(app: InProcess, mcp: RawMcp, bad: Any) -> None:
    error = refused(app, mcp, "kumiho_memory_store", {"user_text": bad})
    assert error["field"] == "user_text" and error["message"].startswith("user_text: expected string, got")


def test_bodies_that_are_not_json_or_not_utf8_are_refused_cleanly(app: InProcess, mcp: RawMcp) -> None:
    before = snapshot(app)
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call",
            "params": {"name": "kumiho_memory_store", "arguments": {"user_text": "\ud800 lone"}}}
    for body in (b"", b"{", b"\xff\xfe\x00", json.dumps(call, ensure_ascii=False).encode("utf-8", "surrogatepass"),
                 b'{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "kumiho_memory_store", '
                 b'"arguments": {"user_text": NaN}}}', b"[" * 50_000):
        answer: Answer = mcp.post(body)
        assert answer.refused, body[:80]
    assert snapshot(app) == before


def test_a_lone_surrogate_in_stored_text_is_not_an_internal_error(app: InProcess, mcp: RawMcp) -> None:
    before = snapshot(app)
    answer = mcp.call("kumiho_memory_store", {"user_text": "lone \ud800 surrogate in a memory"})
    assert answer.status == 400 and "Parse error" in answer.text  # the JSON-RPC layer refuses it
    assert snapshot(app) == before


# -- metadata.surrounding_text on the store tool: bounded (the metadata value bound; an error naming it), a
# credential in it redacted like the memory's own text, text the store would never keep (cron output) left out
# with a warning

SURROUNDING_KEY = "sk-proj-Zx81Qw72Er63Ty54Ui45Op36"


def stored_with_surrounding(mcp: RawMcp, surrounding: str) -> tuple[dict[str, Any], dict[str, Any]]:
    """The store's answer and the stored revision."""
    answer = mcp.call("kumiho_memory_store", {"space_path": "turns", "user_text": "I loved it, every week!",
                                              "stack_revisions": False,
                                              "metadata": {"surrounding_text": surrounding, "topic": "pottery"}})
    assert answer.payload is not None and answer.payload.get("stored") is True, answer.text[:500]
    revision = mcp.call("kumiho_get_revision", {"kref": answer.payload["revision_kref"]}).payload
    assert revision is not None and "error" not in revision, revision
    return answer.payload, revision


def test_a_surrounding_text_too_long_is_refused_naming_it(app: InProcess, mcp: RawMcp) -> None:
    before = snapshot(app)
    answer = mcp.call("kumiho_memory_store", {"user_text": "A turn.", "metadata": {"surrounding_text": "w" * 4097}})
    assert answer.payload is not None and "error" in answer.payload, answer.text[:500]
    error = answer.payload["error"]
    assert error["field"] == "metadata.surrounding_text"
    assert error["message"] == "metadata.surrounding_text: at most 4096 characters (got 4097); shorten it"
    assert snapshot(app) == before


def test_a_credential_in_the_surrounding_text_is_redacted(mcp: RawMcp) -> None:
    answer, revision = stored_with_surrounding(mcp, f"How was the pottery class? (my key is {SURROUNDING_KEY})")
    surrounding = revision["metadata"]["surrounding_text"]
    assert SURROUNDING_KEY not in surrounding and "[secret]" in surrounding and "pottery class" in surrounding
    assert "warnings" not in answer


def test_surrounding_text_the_store_would_never_keep_is_left_out_with_a_warning(mcp: RawMcp) -> None:
    answer, revision = stored_with_surrounding(mcp, "[CRON:nightly] backup finished in 42 s")
    assert "surrounding_text" not in revision["metadata"] and revision["metadata"]["topic"] == "pottery"
    assert answer["warnings"] == ["metadata.surrounding_text: left out (cron output is never stored)"]
