"""The MCP server: every tool of the catalogue over the SDK's low-level ``Server``, served over streamable
HTTP at ``/mcp`` (mounted in the Litestar app) and reached from stdio through ``kumiho-ce mcp`` (shim.py).

Results follow what agent hosts actually read (issue 4, MISSION D9): the JSON result as one text block and
as ``structuredContent``; errors as ``isError: true`` with text ``{"error": {"code", "message"}}`` — a
message that says what to change, never a traceback.
"""

from __future__ import annotations

import json
import logging
import time
from collections.abc import Callable
from typing import Any

import anyio
import mcp_types as types
from mcp.server.lowlevel.server import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings

from appliance import __version__
from appliance.core import redaction
from appliance.errors import InvalidArgument, KumihoError
from appliance.mcp_api.catalogue import tools
from appliance.memory.client import Client
from appliance.operations.catalogue import operation, operations
from appliance.operations.definition import Operation
from appliance.services import Handler
from appliance.services.calls import run

log = logging.getLogger(__name__)

# D10: what a stdio shim forwards from its own environment, per request
PROJECT_HEADER = "x-kumiho-project"
LIMIT_HEADER = "x-kumiho-retrieval-limit"
SESSION_HEADER = "x-kumiho-session"
CLIENT_HEADER = "x-kumiho-client"  # who is calling, for the audit trail (appliance/server/callers.py reads it)
MAX_RETRIEVAL_LIMIT = 100  # the bound of the [kumiho] memory_retrieval_limit setting
MAX_ERROR_MESSAGE = 500  # characters of an error message
MAX_ERROR_FIELD = 200  # characters of the field path an error names

def _tool(op: Operation) -> types.Tool:
    return types.Tool(name=op.name, title=op.title, description=op.description, input_schema=op.input_schema,
                      annotations=types.ToolAnnotations.model_validate(op.annotations))


def _text_result(payload: dict[str, Any], is_error: bool) -> types.CallToolResult:
    text = json.dumps(payload, ensure_ascii=False, default=str)
    return types.CallToolResult(content=[types.TextContent(type="text", text=text)],
                                structured_content=payload, is_error=is_error)


def error_result(code: str, message: str) -> types.CallToolResult:
    return _text_result({"error": {"code": code, "message": message}}, True)


def client_from(request: Any, default_project: str) -> Client:
    """Per-client defaults from the forwarded headers (D10); absent → the appliance's configuration."""
    headers = getattr(request, "headers", None) or {}
    return Client(project=headers.get(PROJECT_HEADER) or default_project,
                  retrieval_limit=retrieval_limit_from(headers.get(LIMIT_HEADER)),
                  host_session_id=headers.get(SESSION_HEADER) or None)


def retrieval_limit_from(value: str | None) -> int | None:
    """The ``x-kumiho-retrieval-limit`` header: absent or empty → None; else ASCII digits naming 1 to
    ``MAX_RETRIEVAL_LIMIT`` (``str.isdigit`` would let ``²`` through to ``int``, which refuses it)."""
    if value is None or not value.strip():
        return None
    text = value.strip()
    if not (text.isascii() and text.isdigit() and len(text) <= 3 and 1 <= int(text) <= MAX_RETRIEVAL_LIMIT):
        raise InvalidArgument(f"header {LIMIT_HEADER} must be a whole number from 1 to {MAX_RETRIEVAL_LIMIT} "
                              f"(KUMIHO_MEMORY_RETRIEVAL_LIMIT for the stdio shim); got {json.dumps(text[:20])}",
                              field=LIMIT_HEADER)
    return int(text)


def call(table: dict[str, Handler], name: str, arguments: dict[str, Any] | None, client: Client
         ) -> types.CallToolResult:
    """One tool call, synchronously (the server runs it in a worker thread); ``table`` holds the served tools."""
    handler, op = table.get(name), operation(name)
    if handler is None or op is None:
        return error_result("not_found", f"unknown tool {name!r}; tools/list names the available ones")
    log.debug("tool %s: running", name)  # (the arguments are never logged)
    try:
        _refuse_credential_headers(client)
        result, kinds = run(table, name, arguments, client)
    except KumihoError as exc:
        error = exc.to_dict()
        for key in ("message", "field"):  # no answer carries one either (a field path can quote a dict key)
            if error.get(key):
                error[key] = redaction.redact_secrets(str(error[key]))[0]
        return _text_result({"error": _clipped(error)}, True)
    except Exception:  # a defect: the agent gets a plain message, the log gets the traceback
        log.exception("tool %s failed", name)
        return error_result("internal", f"{name} failed unexpectedly; the appliance log has the details")
    if kinds:
        result = {**result, "redacted": sorted({*result.get("redacted", []), *kinds})}
    return _text_result(result, False)


def _error_code(result: types.CallToolResult) -> str | None:
    """The code of an error answer (``{"error": {"code", …}}``), None for a result."""
    if not result.is_error:
        return None
    error = (result.structured_content or {}).get("error")
    return str(error.get("code", "internal")) if isinstance(error, dict) else "internal"


def _refuse_credential_headers(client: Client) -> None:
    """The forwarded project and session headers are names and refuse a credential like name arguments (the
    arguments themselves pass the write boundary, D5, in ``services.calls.run``: no credential reaches the graph,
    the index, the working memory, an artifact, the model's response cache or a log)."""
    redaction.refuse_credential(client.project, PROJECT_HEADER)
    if client.host_session_id:
        redaction.refuse_credential(client.host_session_id, SESSION_HEADER)


def _clipped(error: dict[str, Any]) -> dict[str, Any]:
    """An error message that quotes the caller's value (a 4 KiB model name, say) is cut: it says what to change."""
    message = str(error.get("message", ""))
    if len(message) > MAX_ERROR_MESSAGE:
        error = {**error, "message": message[: MAX_ERROR_MESSAGE - 1] + "…"}
    if len(str(error.get("field") or "")) > MAX_ERROR_FIELD:
        error = {**error, "field": str(error["field"])[: MAX_ERROR_FIELD - 1] + "…"}
    return error


def check_complete(table: dict[str, Handler]) -> None:
    """Start-up refuses a catalogue and a handler table that disagree: a served tool whose service was never
    registered would otherwise drop out of tools/list without a word, and a handler no operation declares
    could never be called. (A handler of an operation behind a switch that is off is fine: it is not served.)"""
    missing = sorted(set(tools()) - set(table))
    unknown = sorted(set(table) - set(operations()))
    if missing or unknown:
        raise RuntimeError("the MCP tools and their services disagree: "
                           + "; ".join([*(["no service performs " + ", ".join(missing)] if missing else []),
                                        *(["no operation declares " + ", ".join(unknown)] if unknown else [])]))


def build_server(table: dict[str, Handler], default_project: str,
                 on_call: Callable[[str, float, str | None], None] | None = None) -> Server[Any]:
    """``on_call(tool, seconds, error code or None)`` is told of every tool call answered (the metrics)."""
    check_complete(table)
    served = tools()  # the switches are read once, when the server is built, not on every call
    listed = [_tool(op) for op in served.values()]
    table = {name: table[name] for name in served}

    async def list_tools(ctx: Any, params: Any) -> types.ListToolsResult:
        return types.ListToolsResult(tools=listed)  # one page: agent hosts read it once, without paging

    async def call_tool(ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        started = time.perf_counter()
        try:
            client = client_from(ctx.request, default_project)
        except KumihoError as exc:
            result = _text_result({"error": exc.to_dict()}, True)
        else:
            result = await anyio.to_thread.run_sync(call, table, params.name, params.arguments, client)
        if on_call is not None:
            on_call(params.name, time.perf_counter() - started, _error_code(result))
        return result

    return Server("kumiho-ce", version=__version__, title="kumiho-ce memory",
                  instructions="Engage memory before answering (kumiho_memory_engage); reflect after "
                               "(kumiho_memory_reflect) with the source_krefs engage returned.",
                  on_list_tools=list_tools, on_call_tool=call_tool)


def session_manager(server: Server[Any]) -> StreamableHTTPSessionManager:
    """Stateless JSON responses: every POST answered with plain application/json and no notification
    first (issue 4: Revka takes the first message of a stream). Host and Origin are checked for every route
    by the front door (appliance/server/door.py), so the SDK's own check, which knows only loopback names,
    stays off."""
    return StreamableHTTPSessionManager(app=server, json_response=True, stateless=True,
                                        security_settings=TransportSecuritySettings(
                                            enable_dns_rebinding_protection=False))
