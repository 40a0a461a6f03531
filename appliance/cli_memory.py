"""``kumiho-ce memory store|get|list|recall|forget|count|export|purge|health``: the Memory API from the
command line. Each command calls the same ``/api/v1/memories`` route a client would, on the running appliance
or, when none runs, on this process holding the data directory (``appliance.cli_connect``), so the checks,
bounds and errors are the API's. ``--json`` prints the API's answer; otherwise a short human-readable form.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from appliance.cli_connect import ApplianceHttp, connect, raise_for_problem
from appliance.config import Settings
from appliance.errors import InvalidArgument

API = "/api/v1/memories"
PREVIEW = 120  # characters of content a listing shows (as `revka memory list`)


def add_parser(commands: Any) -> None:
    memory = commands.add_parser("memory", help="the Memory API: store, get, list, recall, forget, count, export, "
                                 "purge, health (docs/memory-api.md)")
    actions = memory.add_subparsers(dest="memory_command", required=True, metavar="ACTION")

    def action(name: str, help_text: str, *, namespace: bool = True) -> argparse.ArgumentParser:
        parser: argparse.ArgumentParser = actions.add_parser(name, help=help_text)
        if namespace:
            parser.add_argument("--namespace", "-n", help="the namespace (default: [memory] default_namespace)")
        parser.add_argument("--json", action="store_true", help="print the API's JSON answer")
        return parser

    store = action("store", "store an entry (a key stored again gets a new revision)")
    store.add_argument("key")
    store.add_argument("content", help="the text; - reads it from stdin")
    store.add_argument("--category", "-c", default="core", help="core (default), daily, conversation or a custom label")
    store.add_argument("--session", help="the session it belongs to")
    store.add_argument("--importance", type=float, help="0.0..1.0: higher surfaces first on recall")
    store.add_argument("--superseded-by", help="the key of an existing entry that replaces this one")
    store.add_argument("--supersedes", help="the key of an existing entry this one replaces")
    store.add_argument("--meta", action="append", default=[], metavar="NAME=VALUE",
                       help="more metadata (store_with_metadata); repeat for several")

    get = action("get", "one entry by its key")
    get.add_argument("key")

    listing = action("list", "entries of a namespace, newest first")
    listing.add_argument("--category", "-c", help="only this category")
    listing.add_argument("--session", help="only this session")
    listing.add_argument("--limit", type=int, default=50, help="at most this many (1..1000; default 50)")
    listing.add_argument("--offset", type=int, default=0, help="skip this many")

    recall = action("recall", "the entries that best match a query, with their score")
    recall.add_argument("query")
    recall.add_argument("--limit", type=int, default=5, help="at most this many (1..1000; default 5)")
    recall.add_argument("--since", help="only entries stored at or after this RFC 3339 time")
    recall.add_argument("--until", help="only entries stored at or before this RFC 3339 time")
    recall.add_argument("--category", "-c", help="only this category")
    recall.add_argument("--session", help="only this session")

    forget = action("forget", "forget an entry (deprecated: it leaves every answer, and stays in the graph)")
    forget.add_argument("key")

    count = action("count", "how many entries a namespace holds")
    count.add_argument("--category", "-c", help="only this category")
    count.add_argument("--session", help="only this session")

    export = action("export", "a namespace's entries as JSON Lines, oldest first")
    export.add_argument("--since", help="only entries stored at or after this RFC 3339 time")
    export.add_argument("--until", help="only entries stored at or before this RFC 3339 time")
    export.add_argument("--output", "-o", help="write to this file (default: stdout)")

    purge = action("purge", "delete a namespace's entries for real (or only a session's, with --session)")
    purge.add_argument("--session", help="only this session's entries")
    purge.add_argument("--yes", action="store_true", help="really delete (required: nothing can bring them back "
                       "but a backup)")

    action("health", "whether the memory answers")


def _content(text: str) -> str:
    return sys.stdin.read() if text == "-" else text


def _metadata(pairs: list[str]) -> dict[str, str] | None:
    found = {}
    for pair in pairs:
        name, sep, value = pair.partition("=")
        if not sep:
            raise InvalidArgument(f"--meta: give NAME=VALUE (got {pair!r})", field="metadata")
        found[name] = value
    return found or None


def _given(**params: Any) -> dict[str, Any]:
    return {k: v for k, v in params.items() if v is not None}


def _line(entry: dict[str, Any]) -> str:
    content = " ".join(str(entry["content"]).split())
    content = content if len(content) <= PREVIEW else content[:PREVIEW] + "…"
    score = f"  ({entry['score']:.3f})" if entry.get("score") is not None else ""
    return f"{entry['key']}\t[{entry['category']}]\t{content}{score}"


def _show(entry: dict[str, Any]) -> str:
    rows = [("Key", entry["key"]), ("Namespace", entry["namespace"]), ("Category", entry["category"]),
            ("Session", entry.get("session_id")), ("Importance", entry.get("importance")),
            ("Superseded by", entry.get("superseded_by")), ("Stored", entry["timestamp"]), ("Kref", entry["kref"])]
    rows += [(name, value) for name, value in sorted((entry.get("metadata") or {}).items())]
    head = "\n".join(f"{name + ':':<15}{value}" for name, value in rows if value is not None)
    return f"{head}\n\n{entry['content']}"


def run(args: argparse.Namespace, settings: Settings) -> int:
    with connect(settings) as app:
        return _run(app, args)


def _run(app: ApplianceHttp, args: argparse.Namespace) -> int:  # one branch per action
    command, ns = args.memory_command, getattr(args, "namespace", None)
    if command == "export":
        return _export(app, args)
    if command == "store":
        body = _given(key=args.key, content=_content(args.content), category=args.category, namespace=ns,
                      session_id=args.session, importance=args.importance, superseded_by=args.superseded_by,
                      supersedes=args.supersedes, metadata=_metadata(args.meta))
        answer = app.call("POST", API, json=body)
        text = (f"not stored: {answer['skipped']}" if answer.get("stored") is False
                else f"stored {answer['key']!r} in {answer['namespace']} ({answer['kref']})")
    elif command == "get":
        page = app.call("GET", API, params=_given(key=args.key, namespace=ns))
        answer = page["entries"][0]  # the route answers 404 when the key has no entry
        text = _show(answer)
    elif command == "list":
        answer = app.call("GET", API, params=_given(namespace=ns, category=args.category, session_id=args.session,
                                                    limit=args.limit, offset=args.offset))
        shown = [_line(e) for e in answer["entries"]]
        text = "\n".join([*shown, f"{len(shown)} of {answer['total']} entries in {answer['namespace']}."])
    elif command == "recall":
        answer = app.call("POST", f"{API}/recall", json=_given(
            query=args.query, limit=args.limit, namespace=ns, since=args.since, until=args.until,
            category=args.category, session_id=args.session))
        text = "\n".join([_line(e) for e in answer["entries"]] or ["nothing recalled"])
    elif command == "forget":
        # ?key= rather than the key in the path: a key named like a route (count, export…) is forgotten too
        answer = app.call("DELETE", API, params=_given(key=args.key, namespace=ns))
        text = f"forgot {answer['entry']['key']!r} (deprecated; it stays in the graph)"
    elif command == "count":
        answer = app.call("GET", f"{API}/count", params=_given(namespace=ns, category=args.category,
                                                               session_id=args.session))
        text = f"{answer['count']} entries in {answer['namespace']}"
    elif command == "purge":
        if not args.yes:
            raise InvalidArgument("purge deletes entries for real: add --yes to go ahead", field="yes")
        namespace = ns or app.call("GET", f"{API}/count")["namespace"]
        answer = app.call("POST", f"{API}/purge", json=_given(namespace=namespace, session_id=args.session,
                                                              confirm=args.session or namespace))
        text = f"deleted {answer['deleted']} entries of {answer['namespace']}" + (
            f" (session {answer['session_id']})" if answer["session_id"] else "")
    else:
        answer = app.call("GET", f"{API}/health", params=_given(namespace=ns))
        text = (f"healthy: {answer['entries']} entries in {answer['namespace']}" if answer["healthy"]
                else f"unhealthy: {answer['detail']}")
    print(json.dumps(answer, indent=2, ensure_ascii=False) if args.json else text)
    return 0 if command != "health" or answer["healthy"] else 1


def _export(app: ApplianceHttp, args: argparse.Namespace) -> int:
    params = _given(namespace=args.namespace, since=args.since, until=args.until)
    if args.output:  # whole or not at all, as every download of the command line
        _, lines = app.download(f"{API}/export", Path(args.output), label="export", params=params)
    else:
        with app.http.stream("GET", f"{API}/export", params=params) as response:
            raise_for_problem(response, streamed=True)
            lines = 0
            for line in response.iter_lines():
                if line:
                    sys.stdout.write(line + "\n")
                    lines += 1
    if args.output:
        print(json.dumps({"exported": lines, "file": args.output}) if args.json
              else f"exported {lines} entries to {args.output}", file=sys.stderr if not args.json else sys.stdout)
    return 0
