"""The MCP tool reference (docs/mcp-tools.md), generated from the operation definitions and from the constants
the memory code runs on: ``python -m appliance.mcp_api.docs > docs/mcp-tools.md``. tests/test_docs.py keeps
the file fresh. Deterministic: catalogue order inside a fixed group order, no timestamps."""

from __future__ import annotations

import json
from typing import Any

from appliance.config import DEFAULT_PORT
from appliance.core.names import MAX_PATTERN, MAX_SEGMENT, MAX_WILDCARDS
from appliance.errors import (
    AlreadyExists,
    AmbiguousKref,
    Conflict,
    InvalidArgument,
    InvalidKref,
    KumihoError,
    NotFound,
    PermissionDenied,
    Unavailable,
)
from appliance.mcp_api.server import LIMIT_HEADER, PROJECT_HEADER, SESSION_HEADER
from appliance.mcp_api.tool_notes import GROUPS
from appliance.memory.working import MAX_MESSAGE_BYTES
from appliance.memory.writer import (
    MAX_EDGES_PER_WRITE,
    MAX_MEMORIES_PER_WRITE,
)
from appliance.operations.catalogue import operations
from appliance.operations.definition import Operation
from appliance.operations.differences import DIFFERENCES
from appliance.operations.sessions import MAX_SUMMARY_OBJECT
from appliance.operations.validation import MAX_DEPTH, largest_request
from appliance.services.writes import MAX_METADATA_VALUE

COMMAND = "python -m appliance.mcp_api.docs > docs/mcp-tools.md"
MCP_URL = f"http://127.0.0.1:{DEFAULT_PORT}/mcp"



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
                                       Conflict.code, AmbiguousKref.code, PermissionDenied.code, Unavailable.code,
                                       KumihoError.code))
        + f" (`{Conflict.code}`: the request is valid but the current state forbids it, e.g. deleting a "
        f"non-empty space or a published revision without `force`; `{AmbiguousKref.code}` adds `candidates`; "
        f"`{PermissionDenied.code}`: the change touches a namespace the operator made read-only "
        "(`[memory.policy] read_only_namespaces`), and nothing was written; "
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
