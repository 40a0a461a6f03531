"""The MCP tool reference (docs/mcp-tools.md), generated from the operation definitions and from the constants
the memory code runs on: ``python -m appliance.mcp_api.docs > docs/mcp-tools.md``. tests/test_docs.py keeps
the file fresh. Deterministic: catalogue order inside a fixed group order, no timestamps."""

from __future__ import annotations

import json
from typing import Any

from appliance.config import DEFAULT_PORT, KumihoSettings, MemorySettings
from appliance.core.names import MAX_PATTERN, MAX_SEGMENT, MAX_WILDCARDS
from appliance.errors import AmbiguousKref, InvalidArgument, InvalidKref, KumihoError, NotFound, Unavailable
from appliance.mcp_api.catalogue import tools
from appliance.mcp_api.server import LIMIT_HEADER, PROJECT_HEADER, SESSION_HEADER
from appliance.memory.cache import WINDOW_SECONDS
from appliance.memory.model_tools import NO_MODEL
from appliance.memory.operator import GRAPH_MAX
from appliance.memory.service import CAPTURE_TYPES, CONSOLIDATE_AFTER, MAX_METADATA_VALUE, MAX_SUMMARY_OBJECT
from appliance.memory.working import MAX_MESSAGE_BYTES
from appliance.memory.writer import (
    MAX_EDGES_PER_WRITE,
    MAX_MEMORIES_PER_WRITE,
    STACK_MIDDLE,
    STACK_MIN_OVERLAP,
    STACK_MIN_TOKENS,
    STACK_STRONG,
    SUMMARY_LIMIT,
)
from appliance.operations.definition import Operation
from appliance.operations.provenance import MAX_DEPTH as MAX_HOPS
from appliance.operations.validation import MAX_DEPTH, largest_request
from appliance.services.provenance import GENERATION_PARAMS, MAX_EDGES, MAX_REACHED, PROVENANCE_LIMIT

COMMAND = "python -m appliance.mcp_api.docs > docs/mcp-tools.md"
MCP_URL = f"http://127.0.0.1:{DEFAULT_PORT}/mcp"

_FLOOR = MemorySettings.model_fields["min_relevance_score"].default
_CAP = KumihoSettings.model_fields["memory_retrieval_limit"].default
_WINDOW = f"{WINDOW_SECONDS:g}"

_REDACTION = (
    "**Secrets and write-time filters**. Every argument of every tool call passes one redaction before the tool "
    "runs: credentials — API keys and tokens (OpenAI/Anthropic/Stripe-style `sk-…`, AWS access and secret keys, "
    "GitHub, GitLab, Slack, Google, Hugging Face, npm, webhook secrets, JWTs, `Bearer`/`Basic` values), PEM "
    "private keys, passwords in URLs (`scheme://user:password@host`) and labelled values (`password=…`, "
    "`\"api_key\": \"…\"`), and any string under a metadata key that names a credential (`password`, "
    "`token`, `DB_PASSWORD`, …) — become `[secret]` wherever they are: text, titles, summaries, tags, topics, "
    "tools, metadata keys and values at any depth, `user_id`, `source`, `artifact_location`, bundle names, "
    "queries. So nothing written anywhere (working memory, graph, index, artifacts, caches, logs) holds one; "
    "the call still succeeds and its result names what was replaced in `redacted: [...]`. Names and "
    "references — `project` (and the `X-Kumiho-Project` and `X-Kumiho-Session` headers), `space_path`, "
    "`space_paths`, `space_hint`, `session_id`, `context`, krefs, kinds, `edge_type`, `artifact_name`, "
    "`tag`, `model`, `base_url` — are kept as given, so one holding a credential is refused "
    "(`invalid_argument` naming the field) and nothing is written. A password without a label or URL around "
    "it (\"the password is hunter2\") looks like any other word and is not recognised. Some texts are never "
    "stored: empty text, text starting with `[cron:` or `[Heartbeat Task`, text containing `[distilled_` or "
    "`distilled_index_sig:`. That is not an error: `kumiho_memory_store` answers "
    '`{"stored": false, "skipped": "<reason>"}`, '
    "`kumiho_memory_ingest` and `kumiho_memory_add_response` answer with `skipped` and buffer nothing, "
    "and reflect does not buffer such a `response` (`buffered: false`)."
)

# (heading, tools in it, what the schema does not show); a tool missing here lands in "Other tools".
GROUPS: tuple[tuple[str, tuple[str, ...], str], ...] = (
    ("Recall", ("kumiho_memory_engage", "kumiho_memory_recall", "kumiho_memory_retrieve", "kumiho_fulltext_search"),
     "* Scores are on the appliance's one calibrated 0..1 scale (D1, [search.md](search.md)); `min_score` "
     "drops results below it. Recall ranks hybrid (vector + full-text) hits, one memory per item (its "
     "`published` revision, else the latest), with the seed's time decay (D2), current memories before the "
     "ones they supersede, and diversity. Deprecated items never appear.\n"
     "* engage and recall return memories of kind `conversation` (what the write tools create); retrieve "
     "takes the kind as `memory_item_kind`. A `limit` above 100 is treated as 100.\n"
     "* `space_paths` are relative to the project (`decisions`, `/decisions` and `CognitiveMemory/decisions` "
     "are the same space); a space that does not exist is a `not_found` error naming the field.\n"
     f"* **{_WINDOW}-second cache** (D3): an identical `kumiho_memory_engage` / `kumiho_memory_recall` call "
     f"(same arguments, same client) within {_WINDOW} s gets the same result again, marked `cached: true`, "
     "and only while nothing was written: any write empties the cache. Empty results are never cached.\n"
     "* Read-your-writes: a memory stored by an earlier call is found by the next recall.\n"
     "* `graph_augmented: true` asks the local model for two or three other phrasings of the query (its "
     "concern, a cause, consequences), recalls each, merges by best score, then walks one hop over the "
     "provenance edges (`DERIVED_FROM`, `REFERENCED`, `SUPERSEDES`, `CONTRADICTS`, …) of the top five results: "
     "neighbours come with `score: 0`, `graph_augmented: true`, `edge_type` and `from_kref`. The answer's "
     "`graph_augmented` says `used`, the `queries` and how many `neighbours`; if the model cannot answer in "
     "time the original query alone is recalled, with a `note`. Without a model: `{\"used\": false, "
     f'"note": "unavailable: {NO_MODEL} (…); plain recall was used"}}`.\n'
     "* `kumiho_memory_retrieve` modes: `search` (relevance), `latest` (newest first; also `newest`, "
     "`recent`, `most_recent`) and `first` (the oldest match; also `earliest`, `oldest`, `initial`). When "
     "search finds fewer than `limit`, members of the named `bundle_names` fill up (score 0.5).\n"
     "* `kumiho_fulltext_search` is typo-tolerant; `context` is a `project/space` prefix matched by whole "
     "segments."),
    ("Writing memories", ("kumiho_memory_store", "kumiho_memory_reflect"),
     f"* **Stacking** (`stack_revisions`, default true): before writing, a hybrid search for the new "
     f"memory's title and summary looks at items of the same kind in the same space. The best item gets the "
     f"memory as its next revision (with the default tags, `published` moves to it) when it scores "
     f"≥ {STACK_STRONG} whatever its memory type, or ≥ {STACK_MIDDLE} with the same memory type — and in "
     f"both cases title + summary share a lexical overlap ≥ {STACK_MIN_OVERLAP} (Jaccard over words of two "
     f"or more characters and CJK bigrams; a text with fewer than {STACK_MIN_TOKENS} such tokens never "
     "stacks). Deprecated items are never stacked onto. Otherwise a new item is created. Results report "
     "`stacked`, `stack_score`, `stack_runner_up` and `stack_overlap`; `stack_revisions: false` always "
     "creates a new item.\n"
     "* `tags` default to `[\"published\"]`; `latest` is automatic and ignored when given. Summaries longer "
     f"than {SUMMARY_LIMIT} characters are clipped. The memory's text is also written as a Markdown artifact "
     "under the data directory (unless `artifact_location` points elsewhere).\n"
     "* `source_revision_krefs` / `source_krefs` become `DERIVED_FROM` edges (store: `edge_type`); a source "
     "that does not exist is listed in `edges_skipped` instead of failing the write.\n"
     "* `kumiho_memory_reflect` buffers `response` in the session's working memory, then writes every "
     "capture in one transaction: all or none. A capture stacks only when it names a space (`space_hint`, "
     "or the call's `space_path`). Capture types: "
     + ", ".join(f"`{t}`" for t in CAPTURE_TYPES)
     + "; any other lowercase word is stored as given (D7). `revises` (a kref) makes the capture the next "
     "revision of that item, linked `SUPERSEDES` to the previous one, which is marked superseded. An "
     "`event_date` that is not `YYYY`, `YYYY-MM` or `YYYY-MM-DD` is dropped and listed in "
         "`dropped_event_dates`. With `discover_edges` (default true) every stored capture gets edge discovery "
     "in the background (D12): the answer says `edge_discovery: \"queued\"` with `edge_discovery_job` (its "
     "progress at `GET /api/jobs/<id>`), `edges_discovered` counts what exists already (usually 0). Without a "
     f'model: `edge_discovery: "skipped: {NO_MODEL} (…)"`.\n'
     f"* {_REDACTION}"),
    ("Working memory and sessions", ("kumiho_memory_ingest", "kumiho_memory_add_response",
                                     "kumiho_memory_consolidate", "kumiho_memory_store_execution"),
     "* Session identity, in order: an explicit `session_id`; without `user_id`, the host's session "
     "(`KUMIHO_SESSION_ID` of the `kumiho-ce mcp` process, D10); with `user_id`, the active session of "
     "(`context`, `user_id`), else a new `<context>:user-<hash>:<YYYYMMDD>:<seq>`. Results echo `session_id` "
     "and `session_id_source` (`argument`, `host-env`, `active-pointer`, `generated`): reuse the reported "
     "id, never invent one. A blank `session_id` is an error. Buffers survive restarts.\n"
     f"* `kumiho_memory_ingest` answers `should_consolidate: true` once the session holds {CONSOLIDATE_AFTER} "
     "or more messages.\n"
     "* `kumiho_memory_consolidate` stores an agent-written `summary` (text, or an object with `title`, "
     "`summary`, `type`, `classification`, `events`, `knowledge`, `implications`) without any model, writes "
     "the buffer's transcript — credential- and PII-redacted — as the memory's `conversation` artifact, and "
     "clears the buffer: the transcript holds every buffered message, and exactly those are cleared (one "
     "buffered during the run stays in the session). Without `summary` the local model summarises the "
     "session (title, summary, topics, facts, decisions, dated events, implications; the stored text "
     "appends `Key events`, `Key facts`, "
     "`Decisions`, `Future relevance`), tags it `summarized` and `published`, links it `REFERENCED` to what "
     "the session recalled (ingest) or cited (reflect's `source_krefs`) and reports `summarized_by`. The "
     "model reads no structured PII (emails, phones, … replaced); the transcript artifact is also name-"
     "redacted (`[person]`) unless `[maintenance] keep_raw_transcripts`. A model failure is a tool error "
     "with the cause's code (`model_timeout`, `model_output_invalid`, …) and keeps the buffer; a run longer "
     "than `[inference] tool_wait_seconds` answers `status: \"running\"` with a `job_id` and finishes in the "
     "background. Sessions idle for `[maintenance] idle_consolidation_minutes` are consolidated in the "
     f"background. Without a model: `invalid_argument` (field `summary`, \"{NO_MODEL} …\"), buffer kept.\n"
     "* `kumiho_memory_store_execution` records a failure (memory type `error`) when `status` is `failed`, "
     "`error` or `blocked` or `exit_code` is non-zero, else a success (type `action`); stdout and stderr "
     "go to an `execution_log` artifact. Executions never stack.\n"
     "* Secrets are redacted and some texts are never stored, as for "
     "[writing memories](#writing-memories)."),
    ("Model-backed tools", ("kumiho_memory_discover_edges", "kumiho_memory_dream_state"),
     "* `kumiho_memory_discover_edges`: the model writes up to `max_queries` short implication queries from "
     "`summary` (future situations in which the memory would matter); each is recalled within `space_paths` "
     "(default: the memory's own space), and the best `max_edges` hits with score ≥ `min_score` (other items "
     "only) get an `edge_type` edge (default `REFERENCED`) whose metadata records `query`, `score` and "
     "`reason`. Returns `edges: [{source, target, edge_type, query, score}]` and the `queries` the model "
     "wrote (so an empty result shows what was tried).\n"
     "* `kumiho_memory_dream_state`: the model assesses the project's memories created since the last run "
     "(a cursor; the first run sees all) in batches of `batch_size`, proposing deprecations, tags, metadata "
     "and relationship edges. Guardrails: never more than `max_deprecation_ratio` (0.1–0.9) of the memories "
     "assessed in the run (least relevant first, rounded down); never `published` memories unless "
     "`allow_published_deprecation`; never memories younger than `[maintenance] dream_state_min_age_days` "
     "(7); never `official` evidence, `corroborated` only with a stated reason; never a memory another "
     "proposal links to. The report lists `deprecations_guarded` with the guard that held. A real run writes "
     "all its changes, a report revision on `_dream_state/dream_state.report` and the cursor in one "
     "transaction, plus a Markdown report (`report_path`); `dry_run` writes nothing and lists "
     "`would_deprecate`, `would_tag`, `would_link`. It runs on the background queue (nightly at "
     "`[maintenance] dream_state_time`); the tool waits `tool_wait_seconds`, then answers with a `job_id`.\n"
     "* `provider`/`model`/`base_url` choose among what the operator set up, for one Dream State run: "
     "`model` names another chat model of the manifest (`kumiho-ce models list`) once it is installed, or "
     "`provider: openai` (and `base_url`, if given, equal to it) the configured `[inference] endpoint_url` "
     "with its `endpoint_model`. A file path, any other URL, another endpoint model name and a per-call "
     "`api_key` (the key is `[inference] endpoint_api_key`) are `invalid_argument` — with the same message "
     "whether or not such a file or server exists, and nothing is opened or contacted. Errors from a model "
     "or an endpoint say what went wrong (the HTTP status, the broken rule), never what the server "
     "answered.\n"
     f"* Without a model they change nothing and say so: discover_edges returns `edges: []` and `skipped: "
     f"\"{NO_MODEL} (…)\"` (an unknown `revision_kref` is still an error); dream_state with `dry_run` reports "
     f"`would_assess`, without it `success: false` and `skipped`."),
    ("Graph maintenance", ("kumiho_resolve_kref", "kumiho_get_revision_by_tag", "kumiho_deprecate_item"),
     "* krefs: `kref://<project>/<space…>/<item>.<kind>?r=<n>&a=<artifact>`, or the short form without a "
     "kind (D8; `kref://Revka/AgentPool/transport?r=4`). An ambiguous short kref is an `ambiguous_kref` "
     "error listing `candidates`; results always use the canonical form.\n"
     "* `kumiho_resolve_kref` returns the `location` of the named artifact (`&a=`) or of the revision's "
     "default one, with `resolved: false` when there is none.\n"
     "* `kumiho_deprecate_item` takes an item kref (no `?r=`): the item disappears from recall and search "
     "and comes back with `deprecated: false`."),
    ("Edges and provenance", ("kumiho_create_edge", "kumiho_delete_edge", "kumiho_get_edges",
                              "kumiho_get_dependencies", "kumiho_get_dependents", "kumiho_get_provenance_summary",
                              "kumiho_analyze_impact", "kumiho_find_path"),
     "* Edges are typed and directed, from one revision to another; an item kref stands for its latest "
     "revision at the time of the call, and results name exact revisions (`?r=N`). `kumiho_create_edge` "
     "refuses `SUPERSEDES` (the memory tools write it when one memory replaces another: reflect's `revises`, "
     "Dream State) and an edge from a revision to itself; "
     "creating an edge that exists returns it unchanged. `kumiho_delete_edge` answers `deleted: false` when "
     "there was no such edge. Both endpoints must exist (`not_found` naming the field otherwise).\n"
     "* Recall with `graph_augmented: true` follows these edges too: a memory linked to a recalled one "
     "comes back as its neighbour.\n"
     "* Dependencies follow edges out of a revision (what it was derived from, depends on, references), "
     "dependents and impact follow them in. Each revision is listed once, at its shortest distance, "
     f"nearest first. Every walk is bounded: `max_depth` from 1 to {MAX_HOPS} hops, and at most "
     f"{MAX_REACHED} revisions per answer (`truncated: true` says more were within reach; narrow it with "
     f"`edge_types` or a smaller `max_depth`). `kumiho_get_edges` lists at most {MAX_EDGES} edges, oldest "
     "first, with the same `truncated` flag.\n"
     f"* `kumiho_get_provenance_summary` reads at most {PROVENANCE_LIMIT} upstream revisions; it lists the "
     "revision itself and each upstream one whose metadata records generation parameters ("
     + ", ".join(f"`{k}`" for k in GENERATION_PARAMS)
     + "); `dependency_count` counts every upstream revision read.\n"
     "* `kumiho_find_path` follows edges in their direction, source to target; with no path within "
     "`max_depth` it answers `path_found: false` and a `message`."),
    ("Operator tools", ("memory_engage", "memory_reflect", "memory_retrieve", "memory_search", "memory_fulltext",
                        "memory_get_item", "memory_resolve_kref", "memory_get_revision_by_tag", "memory_store",
                        "memory_graph"),
     "Revka's Operator-side wrappers (MISSION §2, §6). Where a `kumiho_*` tool does the same job they behave "
     "like it, except:\n\n"
     "* `memory_engage`: `min_score` is floored at `[memory] min_relevance_score` (default "
     f"{_FLOOR}) and `limit` capped at the client's `KUMIHO_MEMORY_RETRIEVAL_LIMIT` (D10) or else "
     f"`[kumiho] memory_retrieval_limit` (default {_CAP}); both default to that floor and cap, and the "
     f"result echoes the values used. It shares the {_WINDOW}-second cache and answers `context`, "
     "`results`, `source_krefs`, `count`.\n"
     "* `memory_store` requires `title`; `user_text` is optional.\n"
     "* `memory_search` filters items by `context_filter` (project/space path prefix), `name_filter` and "
     "`kind_filter`, with `*` wildcards.\n"
     f"* `memory_graph`: `{{nodes, edges, spaces, stats}}` for a force-directed view, at most {GRAPH_MAX} "
     "items (newest first or by name), with space nodes, `BELONGS_TO` / `CHILD_OF` edges and the items' "
     "real edges."),
)


def reference_markdown() -> str:
    specs = tools()
    grouped = [(title, [n for n in names if n in specs], note) for title, names, note in GROUPS]
    placed = {n for _, names, _ in grouped for n in names}
    rest = [n for n in specs if n not in placed]
    if rest:
        grouped.append(("Other tools", rest, ""))
    lines = [
        "# MCP tools",
        "",
        "Generated from the operation definitions (`appliance/operations/`) and the memory code "
        f"(`{COMMAND}`; a test keeps it fresh). The appliance serves {len(specs)} tools; ready-to-paste client "
        "configurations are in [agent-hosts.md](agent-hosts.md).",
        "",
        "## Transports",
        "",
        f"* **Streamable HTTP** at `/mcp` on the running appliance (default `{MCP_URL}`). Stateless: no "
        "`Mcp-Session-Id`, every POST is answered with one plain `application/json` message (no event "
        "stream). As on every route, the `Host` header must name the appliance (a loopback name, or one of "
        "`[http] allowed_hosts`) and a browser's `Origin` must be the appliance's own page or one of "
        "`[http] cors_origins` (DNS-rebinding protection; see [security.md](security.md)); bound beyond "
        "loopback, requests need exactly `Authorization: Bearer <token>` (the `token` file in the data "
        "directory, or the `api_token` setting). Request bodies are limited to `[http] max_body_bytes` "
        "(4 MiB by default). The `x-kumiho-retrieval-limit` header, when sent, must be a whole number from 1 "
        "to 100.",
        "* **stdio**: `kumiho-ce mcp` holds no store. It forwards every JSON-RPC line to the running "
        "appliance's `/mcp` (starting `kumiho-ce serve` in the background when none answers), so any number "
        "of agent hosts share one store.",
        f"* **Per-client defaults** (D10) travel with each request as headers: `KUMIHO_MEMORY_PROJECT` → "
        f"`{PROJECT_HEADER}` (the project of calls that name none), `KUMIHO_MEMORY_RETRIEVAL_LIMIT` → "
        f"`{LIMIT_HEADER}` (operator limit cap), `KUMIHO_SESSION_ID` → `{SESSION_HEADER}` (host session). "
        "The stdio shim sends them from its environment; HTTP clients may send the headers themselves. They "
        "never change the appliance's configuration.",
        f"* **Project names** (the `project` argument or `{PROJECT_HEADER}`): 1–{MAX_SEGMENT} letters, "
        "digits, `_` and `-`, starting with a letter, digit or `_`. Anything else (`../x`, `a/b`, spaces) is "
        "refused with `invalid_argument` and `field: \"project\"` before anything is written; the message "
        "says when the header was the bad one.",
        "",
        "## Results and errors (D9)",
        "",
        "Every result is one JSON object, given twice: as the only `text` content block (the JSON, for hosts "
        "that read text) and as `structuredContent`. A failed call is a tool result with `isError: true` "
        'whose object is `{"error": {"code", "message", "field?"}}`: `message` says what to change, '
        "`field` names the argument at fault (e.g. `captures[0].title`). Schema violations are reported the "
        "same way. Codes: "
        + ", ".join(f"`{c}`" for c in (InvalidArgument.code, InvalidKref.code, NotFound.code, AmbiguousKref.code,
                                       Unavailable.code, KumihoError.code))
        + f" (`{AmbiguousKref.code}` adds `candidates`; `{Unavailable.code}` means try again shortly, e.g. while "
        f"a damaged search index is being rebuilt; `{KumihoError.code}` is a defect, logged by the appliance, "
        "never a traceback).",
        "",
        *_bounds(specs),
        "## Tools",
        "",
        "| tool | title | read-only | destructive | idempotent |",
        "|---|---|---|---|---|",
    ]
    for _, names, _ in grouped:
        for name in names:
            spec = specs[name]
            lines.append(f"| [`{name}`](#{name}) | {_cell(spec.title)} | {_flag(spec, 'readOnlyHint')} | "
                         f"{_flag(spec, 'destructiveHint')} | {_flag(spec, 'idempotentHint')} |")
    for title, names, note in grouped:
        lines += ["", f"## {title}"]
        if note:
            lines += ["", note]
        for name in names:
            lines += ["", *_tool(specs[name])]
    return "\n".join(lines) + "\n"


def _bounds(specs: dict[str, Operation]) -> list[str]:
    """The limits every call meets: the parameter tables show each field's own; these span fields."""
    sizes = {name: largest_request(spec.input_schema) for name, spec in specs.items()}
    biggest = max(sizes, key=lambda n: sizes[n])
    reflect = specs["kumiho_memory_reflect"].input_schema["properties"]
    metadata = specs["kumiho_memory_store"].input_schema["properties"]["metadata"]
    return [
        "## Bounds",
        "",
        "Every text, list and number a tool takes has a limit, shown in its parameter table (`≤ 200 "
        "characters`, `≤ 16 items`, `≥ 1; ≤ 1000`); a call beyond one is refused as a whole, before anything "
        "is written, with `invalid_argument`, the `field` and the limit, e.g. `captures: at most "
        f"{reflect['captures']['maxItems']} items (got {reflect['captures']['maxItems'] + 1}); send fewer, or "
        "split the call in several`. Limits that span fields:",
        "",
        "| what | limit |",
        "|---|---|",
        f"| nesting of the arguments (objects and lists inside each other) | {MAX_DEPTH} levels |",
        f"| arguments of one call | {specs[biggest].input_schema['maxProperties']}; undeclared ones are ignored |",
        f"| memories written by one call (reflect's `captures`) | {MAX_MEMORIES_PER_WRITE} |",
        f"| provenance edges written by one call: captures × `source_krefs` (reflect), "
        f"`source_revision_krefs` (store) | {MAX_EDGES_PER_WRITE} |",
        f"| `metadata` (store) | {metadata['maxProperties']} keys of ≤ {metadata['propertyNames']['maxLength']} "
        f"characters; each value ≤ {MAX_METADATA_VALUE} characters (JSON-encoded when not a string) |",
        f"| consolidate's `summary` object | {MAX_SUMMARY_OBJECT} characters as JSON |",
        f"| wildcard filters (`memory_search` `context_filter`, `name_filter`) | {MAX_PATTERN} characters, "
        f"{MAX_WILDCARDS} wildcards (`*`, `?`, `[`) |",
        f"| one working-memory message (ingest's `message`, `response`) | {MAX_MESSAGE_BYTES} bytes of UTF-8 |",
        "",
        f"The largest valid call is `{biggest}` with about {sizes[biggest] // 1000} thousand characters of "
        f"arguments (`kumiho_memory_reflect`: {sizes['kumiho_memory_reflect'] // 1000} thousand), at most "
        "4 bytes each in UTF-8.",
        "",
    ]


def _tool(spec: Operation) -> list[str]:
    lines = [f"### {spec.name}", "", f"**{spec.title}** — read-only: {_flag(spec, 'readOnlyHint')}, "
             f"destructive: {_flag(spec, 'destructiveHint')}, idempotent: {_flag(spec, 'idempotentHint')}.", "",
             spec.description, ""]
    rows = _rows(spec.input_schema, "")
    if not rows:
        return [*lines, "No parameters."]
    return [*lines, "| parameter | type | default | required | description |", "|---|---|---|---|---|", *rows]


def _rows(schema: dict[str, Any], prefix: str) -> list[str]:
    required = set(schema.get("required", []))
    rows = []
    for name, prop in schema.get("properties", {}).items():
        default = f"`{_cell(json.dumps(prop['default'], ensure_ascii=False))}`" if "default" in prop else ""
        rows.append(f"| `{prefix}{name}` | {_type(prop)} | {default} | {'yes' if name in required else ''} | "
                    f"{_cell(prop.get('description', ''))} |")
        items = prop.get("items", {})
        if prop.get("type") == "array" and items.get("properties"):
            rows += _rows(items, f"{prefix}{name}[].")
        elif prop.get("properties"):
            rows += _rows(prop, f"{prefix}{name}.")
    return rows


def _type(prop: dict[str, Any]) -> str:
    kind = prop.get("type", "any")
    text = " or ".join(f"`{k}`" for k in kind) if isinstance(kind, list) else f"`{kind}`"
    if kind == "array":
        count = f" (≤ {prop['maxItems']} items)" if "maxItems" in prop else ""
        return f"{text}{count} of {_type(prop.get('items', {}))}"
    notes = []
    if "enum" in prop:
        notes.append("one of " + ", ".join(f"`{_cell(json.dumps(v, ensure_ascii=False))}`" for v in prop["enum"]))
    if "pattern" in prop:
        notes.append(f"matching `{_cell(prop['pattern'])}`")
    if "minimum" in prop:
        notes.append(f"≥ {prop['minimum']}")
    if "maximum" in prop:
        notes.append(f"≤ {prop['maximum']}")
    if "maxLength" in prop:
        notes.append(f"≤ {prop['maxLength']} characters")
    if "maxProperties" in prop:
        notes.append(f"≤ {prop['maxProperties']} keys")
    return f"{text} ({'; '.join(notes)})" if notes else text


def _flag(spec: Operation, hint: str) -> str:
    return "yes" if spec.annotations[hint] else "no"


def _cell(text: str) -> str:
    return str(text).replace("|", "\\|").replace("\n", " ")


if __name__ == "__main__":
    print(reference_markdown(), end="")
