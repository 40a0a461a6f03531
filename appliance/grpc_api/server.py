"""Kumiho's gRPC service, ``kumiho.KumihoService``, served on the appliance's one port.

grpcio listens on a Unix socket inside the data directory (mode 0700, so only this user reaches it); the
one-port front (``appliance.server.front``) pumps every connection that opens with the HTTP/2 preface into it.
Every one of the service's 63 methods is registered: those of the dispatch table (``rpcs.RPCS``) run, the
others answer UNIMPLEMENTED saying so. Around each call the server checks the bearer token when the appliance
requires one, names the caller for the audit trail (door ``grpc``, the method), and turns the appliance's
errors into status codes (``errors.status_of``) — never a stack trace or internal text: a failure with no code
of its own (storage, configuration) answers a fixed text and is logged, every other message is redacted of
credentials as the MCP door's are.
"""

from __future__ import annotations

import contextlib
import hmac
import logging
import os
import tempfile
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import TYPE_CHECKING, Any

import grpc
from google.protobuf.message import Message

from appliance.admin_api.auth import presented_tokens
from appliance.core import redaction
from appliance.core.caller import Caller, calling
from appliance.errors import KumihoError
from appliance.grpc_api.descriptor import METHODS, SERVICE_NAME, Method
from appliance.grpc_api.errors import UNEXPECTED, Unimplemented, status_of
from appliance.memory.client import Client
from appliance.server import logs

if TYPE_CHECKING:
    from appliance.app import Services

log = logging.getLogger(__name__)

WORKERS = 32  # calls served at once; more wait in grpcio's queue (an event stream holds one while it lasts)
# Calls admitted at once, running or queued for a worker: beyond, grpcio answers RESOURCE_EXHAUSTED (which
# Kumiho's SDK retries with backoff) instead of queueing without end, up to 4 MiB each, behind one busy client
MAX_CALLS = 256
MAX_STREAMS_PER_CONNECTION = 100  # HTTP/2 streams one connection may have open; more wait in the client
# After the grace, how long ``stop`` waits for handlers still running (a cancelled call does not interrupt its
# handler's thread), so that the stores are not closed under one
DRAIN_SECONDS = 30.0
MAX_MESSAGE_BYTES = 4 * 1024 * 1024  # a request larger than this is refused (RESOURCE_EXHAUSTED) by grpcio
_SOCKET_PATH_MAX = 100  # AF_UNIX paths are limited to 107 bytes; beyond, a private temporary directory
_UNAUTHENTICATED = ("this appliance requires its bearer token: send the metadata `authorization: Bearer <token>` "
                    "(the token is in the data directory's file token, or the api_token setting)")
# Kumiho's SDK pings every 30 s, also between calls; grpcio's defaults would call that abuse and hang up
_OPTIONS = [
    ("grpc.max_receive_message_length", MAX_MESSAGE_BYTES),
    ("grpc.keepalive_permit_without_calls", 1),
    ("grpc.http2.min_ping_interval_without_data_ms", 5_000),
    ("grpc.http2.max_ping_strikes", 0),
    ("grpc.so_reuseport", 0),
    # a connection that sends the HTTP/2 preface but never its SETTINGS is closed as an HTTP one that never sends
    # its request line is (the front's first-byte timeout), not after grpcio's default minute
    ("grpc.http2.settings_timeout", 10_000),
    ("grpc.max_concurrent_streams", MAX_STREAMS_PER_CONNECTION),
]
_STOPPING = "the appliance is stopping; try again once it is back"


class RpcCall:
    """What a method's handler gets besides its request: the appliance's services, the calling client's
    defaults, the call's metadata (lower-case keys) and whether the client has gone."""

    def __init__(self, services: Services, context: grpc.ServicerContext, metadata: dict[str, str]) -> None:
        self.services = services
        self.client = Client(project=services.settings.kumiho.default_project)
        self.metadata = metadata
        self._context = context

    def cancelled(self) -> bool:
        return not self._context.is_active()

    def on_done(self, callback: Callable[[], None]) -> None:
        """Call ``callback`` when the call ends for any reason (the client cancelled, the server stops): a
        streaming handler waiting for something to send wakes up at once."""
        self._context.add_callback(callback)


Rpc = Callable[[RpcCall, Any], Any]  # (call, request message) → response message, or an iterator of them


def _metadata(context: grpc.ServicerContext) -> dict[str, str]:
    return {key.lower(): value for key, value in context.invocation_metadata()
            if isinstance(value, str)}  # binary (-bin) values carry nothing the appliance reads


class GrpcServer:
    def __init__(self, services: Services, table: dict[str, Rpc] | None = None,
                 on_call: Callable[[], None] | None = None, *, turned_off: bool = False,
                 max_calls: int = MAX_CALLS) -> None:
        """``turned_off``: the operator turned gRPC off (``[kumiho] grpc = false``); every call is told so
        (UNIMPLEMENTED, not retried) instead of the connection closing under a client that would retry.
        ``max_calls``: the calls admitted at once (``MAX_CALLS``)."""
        if turned_off:
            table = {}
        elif table is None:
            from appliance.grpc_api.rpcs import RPCS

            table = RPCS
        unknown = set(table) - set(METHODS)
        if unknown:
            raise ValueError(f"not methods of {SERVICE_NAME}: {sorted(unknown)}")
        self._services = services
        self._table = table
        self._turned_off = turned_off
        self._on_call = on_call or (lambda: None)
        self._token = services.token.encode() if services.settings.token_required else None
        self._max_calls = max_calls
        self._server: grpc.Server | None = None
        self._workers: ThreadPoolExecutor | None = None
        self._private_dir: str | None = None
        self._lock = threading.Lock()
        self._drained = threading.Condition(self._lock)  # notified as each call ends
        self._in_flight = 0
        self._stopping = False
        self.socket_path: Path | None = None

    @property
    def in_flight(self) -> int:
        return self._in_flight

    def start(self, socket_path: Path) -> str:
        """Listen on ``socket_path`` (or, when that path is too long for a Unix socket, in a private temporary
        directory) and return the path the front connects to."""
        if len(os.fsencode(socket_path)) > _SOCKET_PATH_MAX:
            self._private_dir = tempfile.mkdtemp(prefix="kumiho-ce-grpc-")  # 0700
            socket_path = Path(self._private_dir) / "grpc.sock"
        socket_path.unlink(missing_ok=True)  # a crashed owner's; this process holds the data directory's lock
        self._workers = ThreadPoolExecutor(max_workers=WORKERS, thread_name_prefix="grpc")
        server = grpc.server(self._workers, options=_OPTIONS, maximum_concurrent_rpcs=self._max_calls)
        server.add_generic_rpc_handlers((grpc.method_handlers_generic_handler(SERVICE_NAME, self._handlers()),))
        server.add_insecure_port(f"unix:{socket_path}")
        server.start()
        os.chmod(socket_path, 0o600)
        self._server, self.socket_path = server, socket_path
        log.info("gRPC %s on the HTTP port: %s (backend %s)", SERVICE_NAME, "turned off" if self._turned_off
                 else f"{len(self._table)} of {len(METHODS)} methods served", socket_path)
        return str(socket_path)

    def stop(self, grace: float = 5.0, drain: float = DRAIN_SECONDS) -> None:
        """Refuse new calls, give those under way ``grace`` seconds, then cancel the rest (event streams), and
        wait up to ``drain`` seconds more for handlers still running: grpcio does not wait for its threads, and
        the caller closes the stores next. Safe to call again."""
        with self._lock:
            self._stopping = True  # a call a worker picks up from now on does not start its handler
        if self._server is not None:
            self._server.stop(grace).wait(grace + 1)
            self._server = None
        if self._workers is not None:
            self._workers.shutdown(wait=False, cancel_futures=True)  # queued calls never start
            self._workers = None
            with self._lock:
                if not self._drained.wait_for(lambda: self._in_flight == 0, timeout=drain):
                    log.warning("gRPC stopped with %d call(s) still running after %.0f s", self._in_flight,
                                grace + drain)
        if self.socket_path is not None:
            self.socket_path.unlink(missing_ok=True)
        if self._private_dir is not None:
            os.rmdir(self._private_dir)
            self._private_dir = None

    # -- one call ----------------------------------------------------------------------------------
    def _handlers(self) -> dict[str, grpc.RpcMethodHandler]:
        handlers = {}
        for name, method in METHODS.items():
            rpc = self._table.get(name) or _unimplemented(name, self._turned_off)
            wrap = self._streaming if method.server_streaming else self._unary
            make = grpc.unary_stream_rpc_method_handler if method.server_streaming \
                else grpc.unary_unary_rpc_method_handler
            handlers[name] = make(wrap(method, rpc), request_deserializer=method.request.FromString,
                                  response_serializer=method.response.SerializeToString)
        return handlers

    def _unary(self, method: Method, rpc: Rpc) -> Callable[[Message, grpc.ServicerContext], Message]:
        def handle(request: Message, context: grpc.ServicerContext) -> Message:
            with self._serving(method, context) as call:
                refusal = None
                try:
                    response: Message = rpc(call, request)
                    return response
                except KumihoError as exc:
                    refusal = _refusal(method, exc)
                except Exception:  # any failure becomes UNKNOWN; the log keeps the details
                    log.exception("gRPC %s failed", method.name)
                    refusal = (grpc.StatusCode.UNKNOWN, UNEXPECTED)
            context.abort(*refusal)  # raises: outside the try, so that it is not caught as a failure
            raise AssertionError("unreachable")

        return handle

    def _streaming(self, method: Method, rpc: Rpc) -> Callable[[Message, grpc.ServicerContext], Iterator[Message]]:
        def handle(request: Message, context: grpc.ServicerContext) -> Iterator[Message]:
            with self._serving(method, context) as call:
                refusal = None
                try:
                    yield from rpc(call, request)
                    return
                except KumihoError as exc:
                    refusal = _refusal(method, exc)
                except Exception:  # any failure becomes UNKNOWN; the log keeps the details
                    log.exception("gRPC %s failed", method.name)
                    refusal = (grpc.StatusCode.UNKNOWN, UNEXPECTED)
            context.abort(*refusal)

        return handle

    def _serving(self, method: Method, context: grpc.ServicerContext) -> _Serving:
        metadata = _metadata(context)
        if self._token is not None and not _authorized(context, self._token):
            context.abort(grpc.StatusCode.UNAUTHENTICATED, _UNAUTHENTICATED)
        return _Serving(self, RpcCall(self._services, context, metadata), method.name, context)


class _Serving:
    """The span of one call: counted (idle detection), and run as the gRPC door's caller of ``method``."""

    def __init__(self, server: GrpcServer, call: RpcCall, method: str, context: grpc.ServicerContext) -> None:
        self._server, self._call, self._method, self._context = server, call, method, context
        self._calling: Any = None
        self._handling: Any = None

    def __enter__(self) -> RpcCall:
        server = self._server
        with server._lock:  # one lock with stop's drain: a call is either counted and waited for, or refused
            if server._stopping:
                self._context.abort(grpc.StatusCode.UNAVAILABLE, _STOPPING)
            server._in_flight += 1
        server._on_call()
        client = self._call.metadata.get("user-agent", "")
        self._calling = calling(Caller("grpc", client, self._method))
        self._calling.__enter__()
        # the call's log lines carry its id (the client's x-request-id when safe to log), returned in the metadata
        request_id = logs.checked_request_id([value for key, value in self._context.invocation_metadata()
                                              if key.lower() == "x-request-id" and isinstance(value, str)])
        self._handling = logs.handling(request_id)
        self._handling.__enter__()
        with contextlib.suppress(ValueError):  # grpcio's "no longer allowed": the call has ended already
            self._context.send_initial_metadata((("x-request-id", request_id),))
        return self._call

    def __exit__(self, *exc: object) -> None:
        self._handling.__exit__(*exc)
        self._calling.__exit__(*exc)
        server = self._server
        with server._lock:
            server._in_flight -= 1
            server._drained.notify_all()
        server._on_call()


def _refusal(method: Method, error: KumihoError) -> tuple[grpc.StatusCode, str]:
    """The status and message a domain error answers. One with no code of its own (a storage or configuration
    failure) can quote the database's own words: it answers the fixed text, and the log keeps the details."""
    code = status_of(error)
    if code == grpc.StatusCode.UNKNOWN:
        log.error("gRPC %s failed: %s", method.name, error.message, exc_info=error)
        return code, UNEXPECTED
    return code, redaction.redact_secrets(error.message)[0]


def _authorized(context: grpc.ServicerContext, token: bytes) -> bool:
    """The token check of the HTTP door (``presented_tokens``: strict ``Bearer`` syntax, no header twice), on
    the call's metadata; every presented token must match."""
    headers = [(key.lower().encode(), value.encode()) for key, value in context.invocation_metadata()
               if isinstance(value, str) and key.lower() in ("authorization", "x-kumiho-token")]
    given = presented_tokens(headers)
    return given is not None and bool(given) and all([hmac.compare_digest(t, token) for t in given])  # each


def _unimplemented(name: str, turned_off: bool) -> Rpc:
    why = ("gRPC is turned off on this appliance (the [kumiho] grpc setting); its HTTP API and MCP tools answer"
           if turned_off else
           f"kumiho-ce does not serve {name}; see the gRPC page of its documentation for the methods it serves")

    def refuse(call: RpcCall, request: Message) -> Message:
        raise Unimplemented(why)

    return refuse
