"""The crash suite's client side: mixed MCP writes over HTTP against a real appliance, a journal of what the
appliance acknowledged, the kill -9 aimed at a moment the appliance's debug log announces, and the checks
that every acknowledged write survived whole.

Every write carries a unique token (letters and short digit runs, so that no redaction pattern touches it)
in its title and text: the token finds it again in the search index, in its artifact file and in a
consolidated transcript.
"""

from __future__ import annotations

import json
import random
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx

from tests.mcp_api.clients import RevkaLikeClient

# What the appliance logs at debug level before and after the moments worth a kill (appliance/search/worker.py,
# appliance/memory/consolidation.py): the kill lands after the first line and, if aimed well, before the second.
MARKS = {
    "index round": ("index round: writing", "index round: finished"),
    "compaction": ("index compaction: started", "index compaction: finished"),
    "consolidation": ("consolidation: writing session", "consolidation: finished session"),
}
AIMS = ("random", "index round", "compaction", "consolidation")
WORKERS = 4
AIM_WINDOW = 10.0  # seconds to wait for an aimed-at moment before killing anyway


class ToolError(AssertionError):
    """The appliance answered a valid call with an error: a defect, not a crash effect."""


class Mcp(RevkaLikeClient):
    """MCP over HTTP as a plain JSON-RPC client: a dead server is an httpx error at once, never a hang."""

    def tool(self, name: str, **arguments: Any) -> dict[str, Any]:
        answer = self.post("tools/call", {"name": name, "arguments": arguments})
        answer.raise_for_status()
        result = answer.json()["result"]
        payload: dict[str, Any] = json.loads(result["content"][0]["text"])
        if result.get("isError"):
            raise ToolError(f"{name}({arguments}) answered {payload}")
        return payload


@dataclass
class Journal:
    """Acknowledged writes, by kind, across every cycle (lists of dicts the checks read)."""

    stores: list[dict[str, Any]] = field(default_factory=list)  # {token, revision, item}
    captures: list[dict[str, Any]] = field(default_factory=list)  # {token, revision, sources}
    deprecated: list[dict[str, Any]] = field(default_factory=list)  # {item, token, revision}
    sessions: dict[str, list[str]] = field(default_factory=dict)  # session -> acknowledged tokens not consolidated
    consolidations: list[dict[str, Any]] = field(default_factory=list)  # {session, revision, tokens}
    # acknowledged messages found in the transcript of a consolidation that was killed before it answered
    # (it committed, so the messages are kept): token -> the artifact files holding it
    recovered: dict[str, list[Path]] = field(default_factory=dict)
    unacknowledged: Counter[str] = field(default_factory=Counter)
    errors: list[str] = field(default_factory=list)
    lock: threading.Lock = field(default_factory=threading.Lock)

    def acknowledged(self) -> dict[str, int]:
        return {"stores": len(self.stores), "reflect_captures": len(self.captures),
                "deprecations": len(self.deprecated), "ingested_messages":
                    sum(len(c["tokens"]) for c in self.consolidations) + sum(map(len, self.sessions.values())),
                "consolidations": len(self.consolidations)}


def token(rng: random.Random, cycle: int, worker: int, n: int) -> str:
    letters = "".join(rng.choice("bcdfghjkmnpqrstvwxz") for _ in range(5))
    return f"kx{cycle:02d}w{worker}n{n:03d}{letters}"


class Workload:
    """WORKERS threads, each with its own MCP client, writing until the appliance dies."""

    def __init__(self, base_url: str, journal: Journal, cycle: int, seed: int) -> None:
        self.base_url, self.journal, self.cycle, self.seed = base_url, journal, cycle, seed
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(w,), name=f"crash-writer-{w}", daemon=True)
                        for w in range(WORKERS)]

    def start(self) -> None:
        for thread in self.threads:
            thread.start()

    def join(self) -> None:
        self.stop.set()
        for thread in self.threads:
            thread.join(60)

    def _run(self, worker: int) -> None:
        rng = random.Random(f"{self.seed}/{self.cycle}/{worker}")
        session = f"crash-{self.cycle:02d}-{worker}"
        n = 0
        with Mcp(self.base_url) as mcp:
            try:
                mcp.handshake()
            except httpx.HTTPError:
                return
            while not self.stop.is_set():
                n += 1
                op = rng.choices(("store", "reflect", "deprecate", "ingest", "consolidate"), (40, 20, 8, 24, 8))[0]
                try:
                    getattr(self, "_" + op)(mcp, rng, worker, n, session)
                except ToolError as exc:
                    with self.journal.lock:
                        self.journal.errors.append(str(exc))
                except (httpx.HTTPError, ValueError, KeyError):  # the appliance died under this call
                    with self.journal.lock:
                        self.journal.unacknowledged[op] += 1
                    return

    def _store(self, mcp: Mcp, rng: random.Random, worker: int, n: int, session: str) -> None:
        tok = token(rng, self.cycle, worker, n)
        answer = mcp.tool("kumiho_memory_store", title=f"Crash note {tok}", stack_revisions=False,
                          user_text=f"The crash suite stored {tok} in cycle {self.cycle}.", space_path="crash/notes")
        with self.journal.lock:
            self.journal.stores.append({"token": tok, "revision": answer["revision_kref"],
                                        "item": answer["item_kref"]})

    def _reflect(self, mcp: Mcp, rng: random.Random, worker: int, n: int, session: str) -> None:
        with self.journal.lock:
            known = [s["revision"] for s in self.journal.stores]
        sources = rng.sample(known, min(len(known), rng.randint(1, 3)))
        tokens = [token(rng, self.cycle, worker, n) + f"c{i}" for i in range(rng.randint(2, 4))]
        answer = mcp.tool("kumiho_memory_reflect", session_id=session + "-reflect", response="noted",
                          source_krefs=sources, discover_edges=False,
                          captures=[{"type": "fact", "title": f"Crash capture {t}",
                                     "content": f"A captured fact that carries {t}."} for t in tokens])
        with self.journal.lock:
            self.journal.captures += [{"token": t, "revision": kref, "sources": sources}
                                      for t, kref in zip(tokens, answer["stored_krefs"], strict=True)]

    def _deprecate(self, mcp: Mcp, rng: random.Random, worker: int, n: int, session: str) -> None:
        with self.journal.lock:
            done = {d["item"] for d in self.journal.deprecated}
            candidates = [s for s in self.journal.stores if s["item"] not in done]
        if not candidates:
            return
        target = rng.choice(candidates)
        mcp.tool("kumiho_deprecate_item", item_kref=target["item"], deprecated=True)
        with self.journal.lock:
            self.journal.deprecated.append({"item": target["item"], "token": target["token"],
                                            "revision": target["revision"]})

    def _ingest(self, mcp: Mcp, rng: random.Random, worker: int, n: int, session: str) -> None:
        tok = token(rng, self.cycle, worker, n)
        mcp.tool("kumiho_memory_ingest", user_id="crash", session_id=session, message=f"Remember {tok} please.")
        with self.journal.lock:
            self.journal.sessions.setdefault(session, []).append(tok)

    def _consolidate(self, mcp: Mcp, rng: random.Random, worker: int, n: int, session: str) -> None:
        with self.journal.lock:
            tokens = list(self.journal.sessions.get(session, []))
        if tokens:
            consolidate(mcp, self.journal, session, tokens)


def consolidate(mcp: Mcp, journal: Journal, session: str, tokens: list[str]) -> None:
    answer = mcp.tool("kumiho_memory_consolidate", session_id=session,
                      summary=f"The crash suite talked about {len(tokens)} tokens.")
    with journal.lock:
        journal.consolidations.append({"session": session, "revision": answer["store_result"]["revision_kref"],
                                       "tokens": tokens})
        journal.sessions.pop(session, None)


def kill_at(process: Any, log: Path, offset: int, aim: str, rng: random.Random) -> dict[str, Any]:
    """kill -9 the appliance: after a random delay, or as soon as its log announces the aimed-at moment.
    Returns what the log says was under way at the kill."""
    started = time.monotonic()
    if aim == "random":
        time.sleep(rng.uniform(0.3, 4.0))
    else:
        begin = MARKS[aim][0]
        warmup = rng.uniform(0.0, 1.5)  # not always the first occurrence
        while time.monotonic() - started < AIM_WINDOW:
            text = log.read_text(errors="replace")[offset:]
            if begin in text and time.monotonic() - started >= warmup:
                break
            time.sleep(0.002)
    process.kill()
    process.wait()
    text = log.read_text(errors="replace")[offset:]
    under_way = [name for name, (begin, end) in MARKS.items() if text.rfind(begin) > text.rfind(end)]
    return {"aim": aim, "after_s": round(time.monotonic() - started, 2), "under_way": under_way}


def wait_caught_up(base_url: str, log: Path, offset: int, timeout: float = 180) -> dict[str, Any]:
    """The index has every graph revision: the start's repair round is done (its log line), nothing is
    pending in the outbox and the sync reports no error."""
    deadline = time.monotonic() + timeout
    while True:
        repaired = "search index ready:" in log.read_text(errors="replace")[offset:]
        ready = httpx.get(base_url + "/api/_ready", timeout=30).json()
        if repaired and ready["search"]["pending"] == 0 and not ready["search"]["sync_error"]:
            return ready  # type: ignore[no-any-return]
        if time.monotonic() > deadline:
            raise AssertionError(f"the index did not catch up: {ready}")
        time.sleep(0.2)


def indexed(base_url: str, tok: str, deprecated: bool = False) -> list[str]:
    answer = httpx.get(base_url + "/api/v1/search", timeout=30,
                       params={"q": tok, "mode": "text", "limit": 10, "include_deprecated": deprecated})
    answer.raise_for_status()
    return [r["revision_kref"] for r in answer.json()["results"]]


def artifact_text(mcp: Mcp, revision: str) -> str:
    location = mcp.tool("kumiho_resolve_kref", kref=revision)["location"]
    try:
        return Path(location).read_text(encoding="utf-8")
    except OSError:
        return ""


class Checker:
    """Checks acknowledged writes through the front doors (MCP, the search API); ``check`` returns what is
    missing, as readable strings."""

    def __init__(self, base_url: str, journal: Journal) -> None:
        self.base_url, self.journal = base_url, journal
        self.checked = 0

    def check(self, since: dict[str, int]) -> list[str]:
        """Every acknowledged write from the ``since`` positions of the journal's lists on."""
        j, missing = self.journal, []
        with Mcp(self.base_url) as mcp:
            mcp.handshake()
            for entry in j.stores[since.get("stores", 0):]:
                missing += self._memory(mcp, entry, "store")
            for entry in j.captures[since.get("captures", 0):]:
                missing += self._memory(mcp, entry, "capture")
                edges = mcp.tool("kumiho_get_edges", revision_kref=entry["revision"], direction="outgoing")
                targets = {e["target_kref"] for e in edges["edges"]}
                missing += [f"capture {entry['token']}: edge to {s} missing" for s in entry["sources"]
                            if s not in targets]
            for entry in j.deprecated[since.get("deprecated", 0):]:
                self.checked += 1
                if entry["revision"] in indexed(self.base_url, entry["token"]):
                    missing.append(f"deprecation of {entry['item']}: still found by default searches")
                found = mcp.tool("kumiho_fulltext_search", query=entry["token"], include_deprecated=True)["results"]
                if not any(r["item"]["kref"] == entry["item"] and r["item"]["deprecated"] for r in found):
                    missing.append(f"deprecation of {entry['item']}: the item is not deprecated")
            for entry in j.consolidations[since.get("consolidations", 0):]:
                self.checked += 1
                text = artifact_text(mcp, entry["revision"])
                missing += [f"consolidation {entry['revision']}: message {t} not in its transcript"
                            for t in entry["tokens"] if t not in text]
        return missing

    def _memory(self, mcp: Mcp, entry: dict[str, Any], what: str) -> list[str]:
        self.checked += 1
        tok, revision = entry["token"], entry["revision"]
        try:
            resolved = mcp.tool("kumiho_resolve_kref", kref=revision)
        except ToolError as exc:
            return [f"{what} {tok}: {revision} is not in the graph ({exc})"]
        problems = []
        if not resolved["resolved"] or tok not in artifact_text(mcp, revision):
            problems.append(f"{what} {tok}: artifact file {resolved['location']} missing or without the text")
        if revision not in indexed(self.base_url, tok, deprecated=True):  # deprecation is checked on its own
            problems.append(f"{what} {tok}: {revision} not found in the search index")
        return problems

    def drain_sessions(self, artifacts: Path) -> list[str]:
        """Consolidate every session that still buffers acknowledged messages. Each message must be in the
        new transcript or, when a killed consolidation had committed it before clearing the buffer, in that
        one's transcript file (the final store check confirms the graph references it)."""
        missing = []
        with Mcp(self.base_url) as mcp:
            mcp.handshake()
            for session, tokens in list(self.journal.sessions.items()):
                consolidate(mcp, self.journal, session, tokens)
                self.checked += 1
                text = artifact_text(mcp, self.journal.consolidations[-1]["revision"])
                for tok in tokens:
                    if tok in text:
                        continue
                    holders = [p for p in artifacts.rglob("*.md") if tok in p.read_text(encoding="utf-8")]
                    if holders:
                        self.journal.recovered[tok] = holders
                    else:
                        missing.append(f"session {session}: acknowledged message {tok} is nowhere")
        return missing

    def positions(self) -> dict[str, int]:
        j = self.journal
        return {"stores": len(j.stores), "captures": len(j.captures), "deprecated": len(j.deprecated),
                "consolidations": len(j.consolidations)}
