"""The MCP tool reference (docs/mcp-tools.md), generated from the operation definitions and from the constants
the memory code runs on: ``python -m appliance.mcp_api.docs > docs/mcp-tools.md``. tests/test_docs.py keeps
the file fresh. Deterministic: catalogue order inside a fixed group order, no timestamps."""

from __future__ import annotations

import json
from typing import Any

from appliance.config import DEFAULT_PORT, KumihoSettings, MemorySettings
from appliance.core import insights
from appliance.core.deletion import MAX_LISTED as MAX_LISTED_IMPACT
from appliance.core.experiences import MAX_RECORD_CHARS
from appliance.core.insights import MAX_HYPOTHESES
from appliance.core.names import MAX_PATTERN, MAX_SEGMENT, MAX_WILDCARDS
from appliance.core.patterns import MAX_REQUEST_CHARS as PATTERN_REQUEST_CHARS
from appliance.core.patterns import MAX_SOURCES as PATTERN_SOURCES
from appliance.core.patterns import MAX_SPACES as PATTERN_SPACES
from appliance.core.patterns import SNIPPET_CHARS
from appliance.errors import (
    AlreadyExists,
    AmbiguousKref,
    Conflict,
    InvalidArgument,
    InvalidKref,
    KumihoError,
    NotFound,
    Unavailable,
)
from appliance.mcp_api.server import LIMIT_HEADER, PROJECT_HEADER, SESSION_HEADER
from appliance.memory.cache import WINDOW_SECONDS
from appliance.memory.model_options import NO_MODEL
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
from appliance.operations.catalogue import operations
from appliance.operations.definition import Operation
from appliance.operations.differences import DIFFERENCES
from appliance.operations.operator import GRAPH_MAX
from appliance.operations.provenance import MAX_DEPTH as MAX_HOPS
from appliance.operations.revisions import BATCH_KREFS
from appliance.operations.sessions import MAX_SUMMARY_OBJECT
from appliance.operations.validation import MAX_DEPTH, largest_request
from appliance.services.provenance import GENERATION_PARAMS, MAX_EDGES, MAX_REACHED, PROVENANCE_LIMIT
from appliance.services.recall import LEARNED_KINDS, MAX_LEARNED, UNUSED
from appliance.services.sessions import CONSOLIDATE_AFTER, INGEST_SHOWN
from appliance.services.structure import MAX_LISTED as STRUCTURE_LISTED
from appliance.services.writes import CAPTURE_TYPES, MAX_METADATA_VALUE

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
     "* Scores are on the appliance's one calibrated 0..1 scale ([search.md](search.md)); `min_score` "
     "drops results below it. Recall ranks hybrid (vector + full-text) hits, one memory per item (its "
     "`published` revision, else the latest), with the seed's time decay, current memories before the "
     "ones they supersede, and diversity. Deprecated items never appear.\n"
     "* engage and recall return memories of kind `conversation` (what the write tools create); retrieve "
     "takes the kind as `memory_item_kind`. A `limit` above 100 is treated as 100.\n"
     "* `space_paths` are relative to the project (`decisions`, `/decisions` and `CognitiveMemory/decisions` "
     "are the same space); a space that does not exist is a `not_found` error naming the field.\n"
     f"* **{_WINDOW}-second cache**: an identical `kumiho_memory_engage` / `kumiho_memory_recall` call "
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
     "segments. `include_revision_metadata` adds each result's current `revision`, `include_artifact_metadata` "
     "its `artifacts` (name, location, metadata; deprecated ones left out). `auth_token` is accepted for "
     "Kumiho's clients and ignored: a local appliance has no accounts (like any credential it is replaced "
     "before the call runs, so the answer lists it under `redacted`).\n"
     "* engage also answers `approx_tokens` (the context's characters / 4), `approx_payload_tokens` (the whole "
     "answer's) and `timing_ms` in milliseconds per stage: `search` (the index), `revisions` (reading the "
     "memories), `retrieval` (both, and ranking), `context_assembly`, `query_reformulation` and `graph_edges` "
     "when graph-augmented, `insight` when asked, and `total`.\n"
     "* **Insights** (`include_insights: true`): engage adds an `insight_brief` — review leads drawn from "
     "what the recalled memories already say (a premise that was superseded, a dispute, a prior decision), "
     "each with its sources and a question to check; no model and no extra reads — and a "
     "`synthesis_request` for the host's own model to answer: the recalled memories as `sources` (pinned "
     f"revision krefs with title, summary and provenance, at most {insights.DEFAULT_SOURCE_CHARS:,} characters; what "
     "did not fit is counted in `budget`), the `query`, `current_context`, `goals`, `instructions` "
     "and an `output_contract` (`mode` hypothesis, direct or clarify; `answer`; cited `source_krefs`; "
     "hypotheses with conditions, an alternative explanation and a verification step). Its "
     "`snapshot_fingerprint` (sha256 of the request) lets `kumiho_memory_validate_insight_response` check an "
     "answer against the request as sent. The appliance itself writes no synthesis.\n"
     "* `current_context` and `goals` only feed that request; they do not change what is recalled. "
     f"`include_learned_sources` adds one search for up to {MAX_LEARNED} experiences or pattern proposals "
     f"(kinds {', '.join(f'`{k}`' for k in LEARNED_KINDS)}) within the same spaces, listed first among the "
     "request's sources (not in `results`), and reports `learned_source_status`. Without "
     "`include_insights`, `include_learned_sources` is refused (`invalid_argument` naming it), while "
     "`current_context` and `goals` are accepted (some clients always send `current_context`) and named in the "
     f"answer's `unused` (`{{\"current_context\": \"{UNUSED}\"}}`)."),
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
     "* `policy_kref` (store) names a memory policy: a revision (or an item: its `published`, else latest "
     "revision) whose `policy` metadata is a JSON object. Its `space_root` is put in front of the memory's "
     "space, its `memory_item_kind` is the kind when the call names none, a kind outside its `memory_kinds` "
     "is stored with a `warnings` entry, and the policy revision's `schema` metadata becomes the memory's. A "
     "policy_kref that does not exist or holds no such object is an error naming `policy_kref`.\n"
     "* `kumiho_memory_reflect` buffers `response` in the session's working memory, then writes every "
     "capture in one transaction: all or none. A capture stacks only when it names a space (`space_hint`, "
     "or the call's `space_path`). Capture types: "
     + ", ".join(f"`{t}`" for t in CAPTURE_TYPES)
     + "; any other lowercase word is stored as given. `revises` (a kref) makes the capture the next "
     "revision of that item, linked `SUPERSEDES` to the previous one, which is marked superseded. An "
     "`event_date` that is not `YYYY`, `YYYY-MM` or `YYYY-MM-DD` is dropped and listed in "
         "`dropped_event_dates`. With `discover_edges` (default true) every stored capture gets edge discovery "
     "in the background: the answer says `edge_discovery: \"queued\"` with `edge_discovery_job` (its "
     "progress at `GET /api/jobs/<id>`), `edges_discovered` counts what exists already (usually 0). Without a "
     f'model: `edge_discovery: "skipped: {NO_MODEL} (…)"`.\n'
     "* **Retrying a reflect**: with an `idempotency_prefix` (one per turn, for example the turn's id), each "
     "capture's memory is marked `idempotency_key: <prefix>:<capture index>` and the buffered response with the "
     "prefix. A reflect repeated with the same prefix — after a timeout, a lost answer or a restart of the "
     "appliance — writes nothing again: it answers the first call's `stored_krefs` and `capture_results` "
     "(marked `replayed: true`; `replayed_captures` counts them) and does not buffer the response twice. A "
     "capture index the first call did not have is written. Looking the marks up reads the project's memories "
     "(tens of milliseconds per 10,000), so reflects without a prefix do not pay for it.\n"
     f"* {_REDACTION}"),
    ("Working memory and sessions", ("kumiho_memory_ingest", "kumiho_memory_add_response", "kumiho_chat_add",
                                     "kumiho_chat_get", "kumiho_chat_clear", "kumiho_memory_consolidate",
                                     "kumiho_memory_store_execution"),
     "* Session identity, in order: an explicit `session_id`; without `user_id`, the host's session "
     "(`KUMIHO_SESSION_ID` of the `kumiho-ce mcp` process); with `user_id`, the active session of "
     "(`context`, `user_id`), else a new `<context>:user-<hash>:<YYYYMMDD>:<seq>`. Results echo `session_id` "
     "and `session_id_source` (`argument`, `host-env`, `active-pointer`, `generated`): reuse the reported "
     "id, never invent one. A blank `session_id` is an error. Buffers survive restarts.\n"
     f"* `kumiho_memory_ingest` answers `should_consolidate: true` once the session holds {CONSOLIDATE_AFTER} "
     f"or more messages; it shows at most {INGEST_SHOWN} buffered messages and 100 recalled memories (a larger "
     f"`working_memory_limit` or `recall_limit` is treated as {INGEST_SHOWN}).\n"
     "* `kumiho_chat_add`, `kumiho_chat_get` and `kumiho_chat_clear` work on the same buffers, per project "
     "(`project`, else the client's). `kumiho_chat_add` answers the message's `message_id` "
     "(`<session_id>:<n>`, counting every message the session ever held: an id is never reused, not even "
     "after a clear). `kumiho_chat_get` returns the last `limit` messages, oldest first, with `message_count`; "
     "`ttl_remaining` is always null, because buffers do not expire: they survive restarts and stay until "
     "consolidated or cleared (a full session refuses further messages until then). `kumiho_chat_clear` drops "
     "the messages and the session's metadata without storing anything and answers `cleared_count` (0 the "
     "second time). Reading or clearing by `user_id` needs the user's active session (one that buffered a "
     "message in the last 24 hours); without one the answer is a `not_found` error naming `user_id`, and no "
     "session is created.\n"
     "* `kumiho_memory_consolidate` stores an agent-written `summary` (text, or an object with `title`, "
     "`summary`, `type`, `classification`, `events`, `knowledge`, `implications`) without any model, writes "
     "the buffer's transcript — credential- and PII-redacted — as the memory's `conversation` artifact, and "
     "clears the buffer: the transcript holds every buffered message, and exactly those are cleared (one "
     "buffered during the run stays in the session). Without `summary` the local model summarises the "
     "session (title, summary, topics, facts, decisions, dated events, implications; the stored text "
     "appends `Key events`, `Key facts`, "
     "`Decisions`, `Future relevance`), tags it `summarized` and `published`, links it `REFERENCED` to what "
     "the session recalled (ingest) or cited (reflect's `source_krefs`) and reports `summarized_by`. "
     "`implications` (future situations in which the memory matters) are stored under `Future relevance` when "
     "the summary brings none; `evidence_level` and `source` replace what ingest recorded for the session. The "
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
     f"`would_assess`, without it `success: false` and `skipped`.\n"
     "* `extra_instructions` is added to the assessment prompt as deployment policy (it can only make the "
     "model more conservative; the report says `extra_instructions_active`).\n"
     "* `maintain_graph` also maintains the typed graph that `kumiho_memory_decompose` writes, in the same "
     "transaction as the run: entities that share a name or alias are merged (the duplicate's edges move to "
     "the entity kept, its names become aliases, it is deprecated with `merged_into`), facts that say the same "
     "thing (case and punctuation aside) likewise, and entities or facts left without any edge are deprecated "
     "(`pruned: orphan`). `maintenance_llm` lets the model propose further entity merges among the listed "
     "names; `code_project` also merges the duplicate decisions of that code-decision project. The counts are "
     "in `maintenance` (`entities_merged`, `facts_merged`, `orphans_pruned`, `decisions_deduped`, "
     "`llm_merges`, `edges_repointed`); a dry run lists `would_merge` and `would_prune`. Graph maintenance "
     "needs no model: without one it still runs (no memory is assessed, the cursor stays, `skipped` says "
     "so) and `maintenance_llm` is reported skipped. `maintenance_llm` and `code_project` without "
     "`maintain_graph` are refused."),
    ("Space profiles and the typed graph", ("kumiho_memory_space_profile", "kumiho_memory_decompose"),
     "* `kumiho_memory_space_profile` needs no model. For each space of the project (its own items; spaces "
     "whose name starts with `_` are left out) it computes `churn` (revisions per item, revisions per day "
     "within `window_days`, the longest SUPERSEDES chain), `evidence` (the mean evidence grade of the live "
     "memories: official 1, corroborated 0.7, single_source 0.3, else 0) and `stability` (the share of "
     "live memories that are published, and their median age against 30 days), all 0–1, and a label: "
     "`canonical` (stability ≥ 0.6, churn ≤ 0.4 and, when any memory is graded, evidence ≥ 0.3), "
     "`correspondence` (churn ≥ 0.6, stability ≤ 0.4) or `working`. A space whose metadata `space_class` is "
     "one of these labels keeps it (`pinned`; `observed_label` shows what the scores say). Each run adds a "
     "revision to the space's `_space_profile.space-profile` item (linked by SUPERSEDES to the previous "
     "one, all spaces in one transaction); `drift` lists the spaces whose label changed since. `dry_run` "
     "writes nothing.\n"
     "* `kumiho_memory_decompose` writes what you extracted from a stored memory (`kref`: a revision, or an "
     "item for its latest revision) as typed nodes, in one transaction: entities in `<project>/entities` "
     "(kind `entity`, one per name, so naming an entity again reuses it and adds its aliases), facts in "
     "`<project>/facts` (kind `fact`, one per statement). Every node links `DERIVED_FROM` to the memory; a "
     "fact links `ABOUT` each entity of its `about`; a relation links its subject to its object with its "
     "predicate (WORKS_AT, PART_OF, LOCATED_IN, USES, DEPENDS_ON, …; any other predicate is `RELATES_TO` "
     "with the predicate in the edge's metadata). `supersedes` links the new statement `SUPERSEDES` the "
     "fact it `replaces` (a statement or a kref; that fact gets `status: superseded`), `contradicts` with "
     "`CONTRADICTS`. Typed nodes are never `conversation` memories, so recall does not show them; "
     "Dream State's `maintain_graph` keeps them tidy. Returns `decomposed` (nodes created, edges written)."),
    ("Code decisions", ("kumiho_code_why", "kumiho_code_ingest", "kumiho_code_capture", "kumiho_code_mine_session"),
     "Offered only when the appliance runs with `KUMIHO_MEMORY_DECISIONS=1` in its environment (for the "
     "stdio shim: in the environment of the appliance it starts, or of `kumiho-ce serve`). Decisions are "
     "`decision` items of the `<project>-decisions` project, one space per repository.\n\n"
     "* Repositories are read only under `[maintenance] code_repo_roots` (a relative `repo_path` is taken "
     "inside the first root), with read-only git commands; a path elsewhere is never looked at.\n"
     "* `kumiho_code_capture` needs no model: it stores your decisions with their rationale, evidence, files "
     "(`path` or `path:10-20`) and symbols, anchored to `commit_ref` resolved to a commit id when the "
     "repository can be read (else stored as given, `commit_resolved: false`, with a `note` saying why).\n"
     "* `kumiho_code_why` returns the decisions anchored to `file` (a line range holding `line` ranks "
     "first), or sharing words with `question`, narrowed by `repo` and ranked up by `commit`, with a Markdown "
     "`context` to quote.\n"
     "* `kumiho_code_ingest` reads up to `max_commits` commit messages of `rev_range` (default: the "
     "history of HEAD; merges left out) with `git log` and has the local model list the decisions they "
     "state; commits mined before are skipped unless `force`. `kumiho_code_mine_session` does the same "
     "with a session's buffered messages (`session_id`) or a consolidated conversation's summary "
     "(`conversation_kref`), anchored to HEAD. With `ingest_first` (the default) it first mines the "
     "repository's history not mined yet, as `kumiho_code_ingest` with its defaults would, and answers what "
     "that did under `ingest_first` (or why it was skipped: no readable repository under the configured roots, "
     "no commit yet). A transcript mined before, unchanged since, is not mined again unless `force`. "
     "Without a model both answer `skipped`."),
    ("Projects, spaces and items", ("kumiho_list_projects", "kumiho_get_project", "kumiho_create_project",
                                    "kumiho_delete_project", "kumiho_get_spaces", "kumiho_get_space",
                                    "kumiho_create_space", "kumiho_delete_space", "kumiho_get_item",
                                    "kumiho_search_items", "kumiho_create_item", "kumiho_delete_item",
                                    "kumiho_set_metadata"),
     f"* Project, space and item names: 1–{MAX_SEGMENT} letters, digits, `_` and `-`, starting with a letter, "
     "digit or `_`; a kind may also hold `.`. The kind `bundle` is reserved for bundles. Space paths read "
     "`/<project>/<space>/<sub-space>`.\n"
     "* Creating a project whose name is taken (by an archived project too) is an `already_exists` error. "
     "Creating a space or an item that exists returns it with `created: false`; an existing item gets the "
     "given `metadata` merged in. `kumiho_create_space` creates one level: `parent_path` (default: the "
     "project's top level) must exist and lie in `project_name`.\n"
     f"* `kumiho_get_spaces` and `kumiho_search_items` answer at most {STRUCTURE_LISTED} entries; when more "
     "match, the answer adds `total` and `truncated: true` (narrow the filters).\n"
     "* `kumiho_search_items`: `context_filter` is a plain prefix of `project/space/…` (so `Atlas` also "
     "matches `Atlas2`; add a `/` to stop at the segment) or a pattern with `*`, `?` or `[…]` matched "
     "against the item's whole space path (`Atlas/*`, `*/characters`); `name_filter` is a case-insensitive "
     "substring or such a pattern (`hero*`); `kind_filter` is exact. Filters hold at most "
     f"{MAX_PATTERN} characters and {MAX_WILDCARDS} wildcards. Deprecated items and the items of archived "
     "projects are left out; `include_metadata` adds each item's metadata. `auth_token` is accepted and "
     "ignored: the appliance has no accounts (who may call it is set by where it listens and its API token, "
     "see [security.md](security.md)).\n"
     "* `kumiho_set_metadata` merges string values into an item (kref without `?r=`) or a revision "
     "(`?r=N`, or `?t=<tag>` for the revision holding the tag; its search text follows) and returns the "
     "whole merged `metadata`. Other values are refused: JSON-encode them first.\n"
     "* Deleting: an item with revisions needs `force: true` (its revisions, artifacts and edges go with it; "
     "to hide an item instead, deprecate it), and so does a space that holds spaces or items (everything "
     "in it goes). A project's top space goes only with the project. What is deleted is gone from search "
     "and recall at once; the Markdown files of deleted memories are moved to `artifacts/.orphaned/` under "
     "the data directory at the next start, not deleted.\n"
     "* `kumiho_delete_project` without `force` archives the project: nothing is removed, but it leaves "
     "`kumiho_list_projects`, item search, recall and full-text search; `kumiho_get_project` still shows "
     "it with `deprecated: true` and its name stays taken. No tool restores an archived project.\n"
     "* `force: true` deletes a project for good, in two calls. The first deletes nothing and answers "
     "`requires_confirmation: true` with an `impact_snapshot_id` and `impact_snapshot_hash`, the "
     f"`descendants` (its spaces and items, the first {MAX_LISTED_IMPACT}; `descendant_count`), `counts` "
     "(spaces, items, revisions, artifacts, edges) and the `blockers`: edges and bundle memberships from "
     "other projects into this one (`blocker_count`). The second call repeats `project_name`, `force`, the "
     "id and the hash, with `confirmed: true`, and deletes the project and everything in it (`removed` "
     "counts what went). It is refused with `conflict` when the project changed since the snapshot "
     "(field `impact_snapshot_hash`: take a new one) or while blockers remain (field `project_name`: "
     "delete those edges or memberships first). Nothing is kept between the two calls: the hash is "
     "checked against the project as it is at the second call. `confirmed` or a snapshot without `force`, "
     "`confirmed` without both the id and the hash, or the id and hash without `confirmed` are refused with "
     "`invalid_argument` naming the field, and nothing is archived or deleted."),
    ("Graph maintenance", ("kumiho_resolve_kref", "kumiho_get_revision_by_tag", "kumiho_deprecate_item"),
     "* krefs: `kref://<project>/<space…>/<item>.<kind>?r=<n>&a=<artifact>`, or the short form without a "
     "kind (`kref://Revka/AgentPool/transport?r=4`). An ambiguous short kref is an `ambiguous_kref` "
     "error listing `candidates`; results always use the canonical form.\n"
     "* `kumiho_resolve_kref` returns the `location` of the named artifact (`&a=`) or of the revision's "
     "default one, with `resolved: false` when there is none.\n"
     "* `kumiho_deprecate_item` takes an item kref (no `?r=`): the item disappears from recall and search "
     "and comes back with `deprecated: false`."),
    ("Experiences and patterns", ("kumiho_memory_record_experience", "kumiho_memory_record_outcome",
                                  "kumiho_memory_prepare_patterns", "kumiho_memory_store_pattern",
                                  "kumiho_memory_check_pattern", "kumiho_memory_validate_insight_response"),
     "Keyless: your agent's own model extracts experiences and proposes patterns; the appliance stores and "
     "checks them, calls no model for them, and never turns a snapshot or a proposal into a belief.\n\n"
     "* `kumiho_memory_record_experience` stores the record as an item of kind `experience` (default space "
     "`experiences` of the client's project; `space_path` as for the write tools), tagged `experience` and "
     "`evidence:unverified`, not `published`, so recall and engage do not show it; its `source_krefs` (pinned "
     "revisions `…?r=N` that must exist) become `DERIVED_FROM` edges. Texts are trimmed, list entries "
     "de-duplicated, absent `origin`, `decision_state`, `outcome_status` and `acceptance` become `unknown`; an "
     "observed outcome needs both `observed_outcome` and `observed_at` (ISO-8601 with its time zone, stored in "
     f"UTC). The whole record is at most {MAX_RECORD_CHARS} characters, JSON-encoded. The answer is the write "
     "result plus `record` (as stored, with `record_id` and `recorded_at`), `deduplication_key` (the "
     "SHA-256 of the record) and `belief_promoted: false`. The same record again writes nothing and answers "
     "`idempotent: true` with the first call's revision and record.\n"
     "* `kumiho_memory_record_outcome` stores the outcome next to its experience (`experience_kref` must be a "
     "revision `record_experience` returned), linked `DERIVED_FROM` to it and to its own `source_krefs`; "
     "idempotent in the same way.\n"
     f"* `kumiho_memory_prepare_patterns` reads 1–{PATTERN_SOURCES} pinned experience or outcome revisions, "
     f"each inside one of 1–{PATTERN_SPACES} absolute `space_paths` (`/CognitiveMemory/experiences`), and "
     "returns the pattern request: `sources` (snippets of at most "
     f"{SNIPPET_CHARS} characters, lineage, and `source_state`: deprecated, superseded, newer_revision), "
     "`source_krefs`, `limits`, `output_contract`, `host_instruction` and `snapshot_id` (a SHA-256 over the "
     f"whole request). A request longer than {PATTERN_REQUEST_CHARS} characters drops sources from the end "
     "(`omitted_source_krefs`, `truncated: true`). Nothing is written.\n"
     "* `kumiho_memory_store_pattern` refuses a request that was changed (`request.snapshot_id`), a candidate "
     "citing a kref that is not among the request's sources (`candidate.source_krefs[i]`), a bound not kept "
     "(the `output_contract`), a `recurring_pattern` with fewer than two distinct experiences, and — as "
     "`conflict` — a cited source that changed or became stale since the request (prepare again). It then "
     "stores the proposal as kind `pattern_candidate` in `space_path` of the sources' project, tagged "
     "`pattern-candidate`, `inferred`, `proposal`, `evidence:unverified`, linked `DERIVED_FROM` to every cited "
     "source, and answers the write result plus `status: \"stored_proposal\"`, `candidate` (with its "
     "`candidate_id`), `lineage_status` and `idempotent` (the same candidate again writes nothing).\n"
     "* `kumiho_memory_check_pattern` answers `status`: `stale` (a cited source, or the proposal itself, was "
     "deprecated, superseded or got a newer revision: `stale_sources` say which and why), `unknown` (a source "
     "cannot be read inside `space_paths`: `missing_source_krefs`) or `reviewable`; `applicability` is always "
     "`unknown`: only the sources' health is checked.\n"
     "* `kumiho_memory_validate_insight_response` checks an answer against engage's `synthesis_request`: the "
     "request unchanged (`snapshot_fingerprint`), `mode` (`hypothesis`, `direct`, `clarify`), a non-empty "
     f"`answer`, 1–{MAX_HYPOTHESES} complete hypotheses in hypothesis mode (none otherwise), and every kref "
     "it cites, in its lists or its text, among the request's sources. It answers `{valid, errors, "
     "unsupported_source_krefs, validation_scope: \"structural_only\", semantic_support_verified: false}`: "
     "a problem in the answer is a report, not a tool error."),
    ("Revisions, tags, artifacts and bundles",
     ("kumiho_get_item_revisions", "kumiho_get_revision", "kumiho_get_revision_as_of", "kumiho_batch_get_revisions",
      "kumiho_create_revision", "kumiho_delete_revision", "kumiho_tag_revision", "kumiho_untag_revision",
      "kumiho_get_artifacts", "kumiho_get_artifact", "kumiho_get_artifacts_by_location", "kumiho_create_artifact",
      "kumiho_delete_artifact", "kumiho_get_bundle", "kumiho_create_bundle", "kumiho_add_bundle_member",
      "kumiho_remove_bundle_member", "kumiho_get_bundle_members"),
     "* Revisions are numbered 1, 2, 3 … per item and never renumbered; `latest` follows the newest one by "
     "itself (it cannot be applied or removed by hand). Any other tag names at most one revision per item: "
     "tagging another revision moves it, and every move is kept with its time, so "
     "`kumiho_get_revision_as_of` answers which revision held a tag at a moment (`time` as `YYYYMMDDHHMM`, "
     "read as the end of that minute in UTC, or ISO-8601; `not_found` naming `time` when none did).\n"
     "* `published` marks the accepted revision and moves like any tag; it does not freeze anything: a "
     "published revision can still get other tags, and its item new revisions (which do not take "
     "`published` until tagged).\n"
     "* A kref with `?r=<n>` names a revision; an item kref means its latest revision; `?t=<tag>` the "
     "revision holding that tag. `kumiho_get_item_revisions` lists every revision, newest first. "
     "`kumiho_batch_get_revisions` takes up to "
     f"{BATCH_KREFS} `revision_krefs` and {BATCH_KREFS} `item_krefs` (each item's revision holding `tag`, "
     "default `latest`), answers in the order asked and lists the krefs it did not find in `not_found`; "
     "with `allow_partial: false` a miss is a `not_found` error naming the entry (`item_krefs[2]`).\n"
     "* `kumiho_create_revision` takes an item kref without `?r=` and string metadata. Bundles' revisions "
     "record their member changes: they are made by adding and removing members, never created or deleted "
     "directly.\n"
     "* `kumiho_delete_revision` needs `?r=<n>` and deletes the revision with its artifacts and its edges; "
     "`latest` falls back to the newest revision left. A revision that holds `published`, or that edges "
     "from other revisions point to, is kept unless `force: true` (a `conflict` error naming `force` says "
     "what holds it). The deletion is recorded in the audit trail and the revision's text leaves search "
     "and recall at once. `kumiho_untag_revision` answers `untagged: false` when the revision did not hold "
     "the tag.\n"
     "* An artifact is a name (letters, digits, `.`, `_`, `-`) for a file path or URI: the appliance never "
     "reads, copies or deletes the file (deleting the artifact leaves it where it is). A location that "
     "points into the data directory must stay inside it once `..` and symbolic links are resolved "
     "(otherwise `invalid_argument` naming `location`) and is stored resolved; other locations are kept as "
     "given. Creating an artifact whose name exists with the same location returns it (`created: false`); "
     "with another location it is `already_exists`. Without `&a=<name>`, `kumiho_get_artifact` returns the "
     "revision's default artifact, else its first one.\n"
     "* A bundle is an item of kind `bundle` in an existing space; creating one that exists returns it "
     "(`created: false`). Each member added or removed makes a bundle revision whose metadata records "
     "`action` and `member_item_kref`; adding a member twice is `already_exists`, removing a non-member "
     "`not_found`. `kumiho_get_bundle_members` lists the current members with `added_in_revision` and the "
     "bundle's `revision_number`."),
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
     "Revka's Operator-side wrappers. Where a `kumiho_*` tool does the same job they behave "
     "like it, except:\n\n"
     "* `memory_engage`: `min_score` is floored at `[memory] min_relevance_score` (default "
     f"{_FLOOR}) and `limit` capped at the client's `KUMIHO_MEMORY_RETRIEVAL_LIMIT` or else "
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
    specs = operations()  # every operation, those behind a switch too (marked as such)
    gated = sum(spec.gate is not None for spec in specs.values())
    grouped = [(title, [n for n in names if n in specs], note) for title, names, note in GROUPS]
    placed = {n for _, names, _ in grouped for n in names}
    rest = [n for n in specs if n not in placed]
    if rest:
        grouped.append(("Other tools", rest, ""))
    lines = [
        "# MCP tools",
        "",
        "Generated from the operation definitions (`appliance/operations/`) and the memory code "
        f"(`{COMMAND}`; a test keeps it fresh). The appliance serves {len(specs) - gated} tools, and {gated} more "
        "when their switch is on; ready-to-paste client "
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
        f"* **Per-client defaults** travel with each request as headers: `KUMIHO_MEMORY_PROJECT` → "
        f"`{PROJECT_HEADER}` (the project of calls that name none), `KUMIHO_MEMORY_RETRIEVAL_LIMIT` → "
        f"`{LIMIT_HEADER}` (operator limit cap), `KUMIHO_SESSION_ID` → `{SESSION_HEADER}` (host session). "
        "The stdio shim sends them from its environment; HTTP clients may send the headers themselves. They "
        "never change the appliance's configuration.",
        f"* **Project names** (the `project` argument or `{PROJECT_HEADER}`): 1–{MAX_SEGMENT} letters, "
        "digits, `_` and `-`, starting with a letter, digit or `_`. Anything else (`../x`, `a/b`, spaces) is "
        "refused with `invalid_argument` and `field: \"project\"` before anything is written; the message "
        "says when the header was the bad one.",
        "",
        "## Results and errors",
        "",
        "Every result is one JSON object, given twice: as the only `text` content block (the JSON, for hosts "
        "that read text) and as `structuredContent`. A failed call is a tool result with `isError: true` "
        'whose object is `{"error": {"code", "message", "field?"}}`: `message` says what to change, '
        "`field` names the argument at fault (e.g. `captures[0].title`). Schema violations are reported the "
        "same way. Codes: "
        + ", ".join(f"`{c}`" for c in (InvalidArgument.code, InvalidKref.code, NotFound.code, AlreadyExists.code,
                                       Conflict.code, AmbiguousKref.code, Unavailable.code, KumihoError.code))
        + f" (`{Conflict.code}`: the request is valid but the current state forbids it, e.g. deleting a "
        f"non-empty space or a published revision without `force`; `{AmbiguousKref.code}` adds `candidates`; "
        f"`{Unavailable.code}` means try again shortly, e.g. while "
        f"a damaged search index is being rebuilt; `{KumihoError.code}` is a defect, logged by the appliance, "
        "never a traceback).",
        "",
        *_bounds(specs),
        *_differences(),
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


def _differences() -> list[str]:
    """Where a tool's parameters differ from Kumiho's own server (names, types, defaults, enums, required)."""
    lines = ["## Where the parameters differ from Kumiho's own server", "",
             "The tools take the parameters of Kumiho's reference tools, with the same names, types, defaults "
             "and choices, except:", ""]
    for (tool, where), reason in sorted(DIFFERENCES.items()):
        field, aspect = where.rsplit(":", 1)
        lines.append(f"* `{tool}` `{field}` ({_ASPECTS[aspect]}): {reason}.")
    return [*lines, ""]


_ASPECTS = {"required": "required or not", "default": "default", "enum": "allowed values", "type": "type",
            "missing": "not taken", "extra": "an addition"}


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
    if spec.gate:
        lines += [f"Offered only when the appliance runs with `{spec.gate}=1` in its environment.", ""]
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
