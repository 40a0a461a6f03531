"""Seed 001's ``Memory`` interface over the appliance's stores: store, get, list, recall, forget, count,
export, health_check, store_procedural, store_with_metadata, purge_namespace and purge_session.

Entries live in the memory project (``[kumiho] default_project``), one item per key in their namespace's
space (``appliance.memory.entries`` has the layout). Writes go through ``MemoryWriter`` (artifact file
fsynced before the graph commits; one transaction), inside one outer transaction with whatever else the
store changes (the supersession edge, the replaced entry's marker, a forgotten entry coming back). Reads of a
namespace look at its space only: the default namespace's space holds the other namespaces' spaces.

Limits (``[memory.policy]``) refuse a store that would exceed them (409); nothing is evicted. Read-only
namespaces are refused by the policy's guard that every graph write passes, not here.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from appliance.config import Settings
from appliance.core import kref as krefs
from appliance.core.model import Item, Revision, every_item
from appliance.errors import Conflict, InvalidArgument, KumihoError, NotFound
from appliance.graph import GraphStore
from appliance.memory import entries, namespaces
from appliance.memory.entries import Entry, NewEntry
from appliance.memory.recall import Recaller, RecallQuery
from appliance.memory.writer import Draft, MemoryWriter, Plan, clip_summary
from appliance.services.purge import purge_items

log = logging.getLogger(__name__)
MAX_LIMIT = 1000  # entries one list or recall answers
MAX_OFFSET = 1_000_000
PAGE = 1000  # the graph store's largest page
PURGE_CHUNK = 200  # items deleted per transaction: a purge of thousands never holds the writer long
RECALL_POOL_FACTOR = 8  # recall ranks more hits than it answers: filters narrow them after search
# A session or a time window is checked after the search (the index does not hold them): recall then ranks this
# many hits, so that better matches of other sessions or times do not fill the pool and leave its entries out.
FILTERED_POOL = 2000
FORGOTTEN = "forgotten through the Memory API"
# Entries one batch store writes in one transaction (it holds the graph's one writer meanwhile: 100 entries are
# a fraction of a second; benchmarks/write_bench.py)
MAX_BATCH = 100


@dataclass(frozen=True)
class Stored:
    """A store's outcome: the entry, or why the seed's filters skipped it (nothing was written)."""

    entry: Entry | None
    skipped: str | None = None
    created: bool = False  # a new key (False: a new revision of an existing entry)


@dataclass(frozen=True)
class Found:
    item: Item
    revision: Revision | None


# an entry to write: the request, its plan, the entry of its key (if any), and the entries it names as replacing
# it and as replaced by it
_Planned = tuple[NewEntry, Plan, "Found | None", "Found | None", "Found | None"]


class MemoryApi:
    def __init__(self, settings: Settings, graph: GraphStore, writer: MemoryWriter, recaller: Recaller) -> None:
        self.settings, self.graph, self.writer, self.recaller = settings, graph, writer, recaller
        self.project = settings.kumiho.default_project
        self._lock = threading.Lock()  # one store at a time: the limits' counts stay true until the write

    # -- where ------------------------------------------------------------------------------------------
    def namespace(self, value: str | None) -> str:
        """The namespace a call names, else ``[memory] default_namespace``."""
        if value is None or value == "":
            value = self.settings.memory.default_namespace
        return namespaces.check_namespace(value)

    def space(self, namespace: str) -> str:
        return namespaces.namespace_space(self.project, namespace)

    def _kref(self, namespace: str, name: str) -> str:
        segments = krefs.parse_space_path(self.space(namespace))
        return str(krefs.item_kref(segments[0], segments[1:], name, entries.KIND))

    def _find(self, namespace: str, key: str, *, live: bool = True) -> Found | None:
        """The entry of ``key``: the item named by its slug when it holds that key, else the hashed name."""
        for name in dict.fromkeys(entries.item_names(key)):
            kref = self._kref(namespace, name)
            try:
                item = self.graph.get_item(kref)
            except NotFound:
                continue
            revision = self.graph.current_revisions([kref]).get(kref)
            holds = revision.metadata.get("key", item.item_name) if revision else item.item_name
            if holds == key and not (live and item.deprecated):
                return Found(item, revision)
        return None

    def _free_name(self, namespace: str, key: str) -> str:
        first, hashed = entries.item_names(key)
        try:
            self.graph.get_item(self._kref(namespace, first))
        except NotFound:
            return first
        return hashed

    def _items(self, namespace: str) -> list[Item]:
        """Every live entry's item directly in the namespace's space, newest first (an item's modified time is
        its latest revision's): one read of the items, no revision read."""
        space = self.space(namespace)
        try:
            items = every_item(lambda cursor: self.graph.list_items(space, kind_filter=entries.KIND,
                                                                    page_size=PAGE, cursor=cursor))
        except NotFound:  # the space is made by the first store
            return []
        return sorted(items, key=lambda i: (i.modified_at, i.item_name), reverse=True)

    def _with_revisions(self, items: list[Item]) -> Iterator[tuple[Item, Revision]]:
        """The items with their current revisions, read a page at a time (items without one are left out)."""
        for start in range(0, len(items), PAGE):
            chunk = items[start:start + PAGE]
            current = self.graph.current_revisions([i.kref for i in chunk])
            yield from ((i, current[i.kref]) for i in chunk if i.kref in current)

    def _live(self, namespace: str) -> list[tuple[Item, Revision]]:
        """Every live entry directly in the namespace's space, with its current revision, newest first."""
        return list(self._with_revisions(self._items(namespace)))

    def _entry(self, item: Item, revision: Revision, namespace: str, score: float | None = None) -> Entry:
        return entries.entry_from(item.kref, item.item_name, revision.metadata, revision.created_at, namespace,
                                  score)

    # -- store ------------------------------------------------------------------------------------------
    def store(self, *, key: object, content: object, category: object = entries.CORE, namespace: str | None = None,
              session_id: object = None, importance: object = None, superseded_by: object = None,
              supersedes: object = None, metadata: object = None) -> Stored:
        """Store ``content`` under ``key``: a new entry, or a new revision of the key's entry."""
        ns = self.namespace(namespace)
        new = entries.new_entry(key=key, content=content, category=category, namespace=ns, session_id=session_id,
                                importance=importance, superseded_by=superseded_by, supersedes=supersedes,
                                metadata=metadata)
        skipped = entries.write_filter(new.key, new.content)
        if skipped:
            return Stored(None, skipped)
        with self._lock:
            return self._store(new)

    def _store(self, new: NewEntry) -> Stored:
        ns = new.namespace
        existing = self._find(ns, new.key, live=False)
        self._check_limits(new, existing)
        replacing = self._target(ns, new.superseded_by, "superseded_by")
        replaced = self._target(ns, new.supersedes, "supersedes")
        space = self.space(ns)
        draft = Draft(project=self.project, space=space, kind=entries.KIND, memory_type=new.category, title=new.key,
                      summary=clip_summary(new.content), user_text=new.content,
                      metadata=entries.metadata_of(new, replacing.item.kref if replacing else ""), stack=False)
        if existing:
            plan = Plan(draft, item_kref=existing.item.kref,
                        previous_revision_kref=existing.revision.kref if existing.revision else "")
        else:
            plan = Plan(draft, item_name=self._free_name(ns, new.key))

        self.writer.embed([plan])  # outside the transaction: it holds the graph's one writer
        results = self._write([(new, plan, existing, replacing, replaced)])
        self.writer.stage_written([plan], results)
        found = self._find(ns, new.key)
        assert found is not None and found.revision is not None  # written just now, under the lock
        return Stored(self._entry(found.item, found.revision, ns), created=existing is None)

    def _write(self, planned: list[_Planned]) -> list[dict[str, Any]]:
        """The entries' artifact files, then one transaction: their revisions and what each store changes
        besides (a forgotten key back, supersession edges)."""
        return self.writer.write_in_transaction([plan for _, plan, _, _, _ in planned], max_memories=MAX_BATCH,
                                                also=lambda results: self._besides(planned, results))

    def _besides(self, planned: list[_Planned], results: list[dict[str, Any]]) -> None:
        for (new, _, existing, replacing, replaced), result in zip(planned, results, strict=True):
            revision = result["revision_kref"]
            if existing and existing.item.deprecated:  # a forgotten key stored again comes back
                self.graph.set_deprecated(existing.item.kref, False)
            if replacing and replacing.revision:
                self.graph.create_edge(replacing.revision.kref, revision, "SUPERSEDES",
                                       {"reason": "superseded_by", "basis": "memory_api"})
            if replaced and replaced.revision:
                self.graph.create_edge(revision, replaced.revision.kref, "SUPERSEDES",
                                       {"reason": "supersedes", "basis": "memory_api"})
                self.graph.update_revision_metadata(replaced.revision.kref, {
                    "superseded_by": new.key, "superseded_by_kref": result["item_kref"], "status": "superseded"})

    # -- batch store ------------------------------------------------------------------------------------
    def store_many(self, batch: list[dict[str, Any]]) -> list[Stored]:
        """Store up to ``MAX_BATCH`` entries (each as ``store`` takes it) in ONE transaction: all or none. The
        bulk door: the entries are not embedded here, the index sync embeds them in its own batches soon
        after (a recall waits for that: the batch's commit is not staged, ``wait_synced`` waits for it)."""
        if not isinstance(batch, list) or not 1 <= len(batch) <= MAX_BATCH:
            raise InvalidArgument(f"entries: give 1 to {MAX_BATCH} entries (split larger imports over several "
                                  "calls)", field="entries")
        news: list[NewEntry | None] = []
        outcomes: list[Stored | None] = []
        seen: dict[tuple[str, str], int] = {}
        for index, fields in enumerate(batch):
            with _naming_entry(index):
                ns = self.namespace(fields.get("namespace"))
                new = entries.new_entry(namespace=ns, **{"category": entries.CORE, **{
                    k: v for k, v in fields.items() if k != "namespace"}})
            if (ns, new.key) in seen:
                raise InvalidArgument(f"entries[{index}].key: {new.key!r} is stored by entries[{seen[ns, new.key]}] "
                                      "already; give each key once per call", field=f"entries[{index}].key")
            seen[ns, new.key] = index
            skipped = entries.write_filter(new.key, new.content)
            news.append(None if skipped else new)
            outcomes.append(Stored(None, skipped) if skipped else None)
        writing = [(index, new) for index, new in enumerate(news) if new is not None]
        if writing:
            with self._lock:
                stored = iter(self._store_many(writing))
            outcomes = [outcome if outcome is not None else next(stored) for outcome in outcomes]
        return [outcome for outcome in outcomes if outcome is not None]

    def _store_many(self, numbered: list[tuple[int, NewEntry]]) -> list[Stored]:
        """``numbered``: each entry with its index in the call, which an error about it names."""
        news = [new for _, new in numbered]
        found, held = self._find_many(news)
        self._check_batch_limits(numbered, found)
        taken: set[tuple[str, str]] = set()  # item names this call gives to new keys (two keys can share a slug)
        planned: list[_Planned] = []
        for index, new in numbered:
            existing = found.get((new.namespace, new.key))
            with _naming_entry(index):
                replacing = self._target(new.namespace, new.superseded_by, "superseded_by")
                replaced = self._target(new.namespace, new.supersedes, "supersedes")
            draft = Draft(project=self.project, space=self.space(new.namespace), kind=entries.KIND,
                          memory_type=new.category, title=new.key, summary=clip_summary(new.content),
                          user_text=new.content,
                          metadata=entries.metadata_of(new, replacing.item.kref if replacing else ""), stack=False)
            if existing:
                plan = Plan(draft, item_kref=existing.item.kref,
                            previous_revision_kref=existing.revision.kref if existing.revision else "")
            else:
                first, hashed = entries.item_names(new.key)
                free = (new.namespace, first) not in taken and (new.namespace, first) not in held
                plan = Plan(draft, item_name=first if free else hashed)
                taken.add((new.namespace, plan.item_name))
            planned.append((new, plan, existing, replacing, replaced))
        results = self._write(planned)
        current = self.graph.current_revisions([r["item_kref"] for r in results])
        out = []
        for (new, _, existing, _, _), result in zip(planned, results, strict=True):
            revision = current[result["item_kref"]]
            name = result["item_kref"].rsplit("/", 1)[1].rsplit(".", 1)[0]
            out.append(Stored(entries.entry_from(result["item_kref"], name, revision.metadata, revision.created_at,
                                                 new.namespace), created=existing is None))
        return out

    def _find_many(self, news: list[NewEntry]) -> tuple[dict[tuple[str, str], Found], set[tuple[str, str]]]:
        """``_find(live=False)`` of every entry, in two reads, and the (namespace, item name)s held already."""
        names = {(new.namespace, name): self._kref(new.namespace, name)
                 for new in news for name in dict.fromkeys(entries.item_names(new.key))}
        items = self.graph.items_by_kref(list(names.values()))
        current = self.graph.current_revisions(list(items))
        held = {where for where, kref in names.items() if kref in items}
        found: dict[tuple[str, str], Found] = {}
        for new in news:
            for name in dict.fromkeys(entries.item_names(new.key)):
                item = items.get(names[new.namespace, name])
                if item is None:
                    continue
                revision = current.get(item.kref)
                holds = revision.metadata.get("key", item.item_name) if revision else item.item_name
                if holds == new.key:
                    found[new.namespace, new.key] = Found(item, revision)
                    break
        return found, held

    def _check_batch_limits(self, numbered: list[tuple[int, NewEntry]], found: dict[tuple[str, str], Found]
                            ) -> None:
        """``_check_limits`` for a batch: the entries before one count towards its limits."""
        policy = self.settings.memory.policy
        if not policy.max_entries_per_namespace and not policy.max_entries_per_category:
            return
        live: dict[str, list[str]] = {}  # namespace → the category of each live entry
        for index, new in numbered:
            ns = new.namespace
            if ns not in live:
                live[ns] = [r.metadata.get("category", entries.CORE) for _, r in self._live(ns)]
            existing = found.get((ns, new.key))
            with _naming_entry(index):
                self._check_limits(new, existing, live[ns])
            if existing is None or existing.item.deprecated:
                live[ns].append(new.category)
            elif existing.revision and existing.revision.metadata.get("category") != new.category:
                live[ns].remove(existing.revision.metadata.get("category", entries.CORE))
                live[ns].append(new.category)

    def _target(self, namespace: str, key: str, field: str) -> Found | None:
        if not key:
            return None
        found = self._find(namespace, key)
        if found is None:
            raise NotFound(f"{field}: no entry with key {key!r} in namespace {namespace!r}; store it first",
                           field=field)
        return found

    def _check_limits(self, new: NewEntry, existing: Found | None, categories: list[str] | None = None) -> None:
        """``[memory.policy]`` limits: refuse (409) a store that would exceed them; never evict. ``categories``:
        the category of each live entry of the namespace, when the caller counted them already."""
        policy = self.settings.memory.policy
        per_namespace, per_category = policy.max_entries_per_namespace, policy.max_entries_per_category
        adds = existing is None or existing.item.deprecated
        old_category = existing.revision.metadata.get("category") if existing and existing.revision else None
        joins_category = adds or old_category != new.category
        if not (per_namespace and adds) and not (per_category and joins_category):
            return
        live = categories if categories is not None else [
            r.metadata.get("category", entries.CORE) for _, r in self._live(new.namespace)]
        if per_namespace and adds and len(live) >= per_namespace:
            raise Conflict(f"namespace: {new.namespace!r} holds {len(live)} entries, the most "
                           f"[memory.policy] max_entries_per_namespace allows ({per_namespace}); forget or purge "
                           "entries, store into an existing key, or raise the limit", field="namespace")
        if per_category and joins_category:
            in_category = sum(1 for category in live if category == new.category)
            if in_category >= per_category:
                raise Conflict(f"category: namespace {new.namespace!r} holds {in_category} {new.category!r} "
                               f"entries, the most [memory.policy] max_entries_per_category allows "
                               f"({per_category}); forget or purge entries, or raise the limit", field="category")

    def store_procedural(self, *, messages: object, session_id: object = None, namespace: str | None = None,
                         key: object = None) -> Stored:
        """A procedure learned from a conversation: its messages as one entry of category ``procedural``
        (key ``procedural_<hash of the messages>`` unless given)."""
        content = entries.procedural_content(messages)
        if key is None or key == "":
            key = "procedural_" + hashlib.sha1(content.encode()).hexdigest()[:12]
        return self.store(key=key, content=content, category="procedural", namespace=namespace,
                          session_id=session_id)

    # -- read -------------------------------------------------------------------------------------------
    def get(self, key: object, namespace: str | None = None) -> Entry:
        ns = self.namespace(namespace)
        checked = entries.check_key(key)
        found = self._find(ns, checked)
        if found is None or found.revision is None:
            raise NotFound(f"key: no entry with key {checked!r} in namespace {ns!r}", field="key")
        return self._entry(found.item, found.revision, ns)

    def _matching(self, ns: str, category: str | None, session_id: str | None,
                  since: datetime | None = None, until: datetime | None = None) -> list[Entry]:
        """The namespace's live entries that match, newest first."""
        wanted = entries.parse_category(category) if category else None
        session = entries.check_session_id(session_id) if session_id else None
        found = [self._entry(item, revision, ns) for item, revision in self._live(ns)]
        return [e for e in found if (wanted is None or e.category == wanted)
                and (session is None or e.session_id == session) and entries.in_window(e.timestamp, since, until)]

    def list_entries(self, *, namespace: str | None = None, category: str | None = None, session_id: str | None = None,
             limit: int = 100, offset: int = 0) -> tuple[list[Entry], int]:
        """A page of the namespace's entries (newest first) and how many match in all."""
        _bounded(limit, "limit", 1, MAX_LIMIT)
        _bounded(offset, "offset", 0, MAX_OFFSET)
        ns = self.namespace(namespace)
        if not category and not session_id:  # no filter on metadata: read the revisions of this page only
            items = self._items(ns)
            page = [self._entry(i, r, ns) for i, r in self._with_revisions(items[offset:offset + limit])]
            return page, len(items)
        found = self._matching(ns, category, session_id)
        return found[offset:offset + limit], len(found)

    def count(self, *, namespace: str | None = None, category: str | None = None,
              session_id: str | None = None) -> int:
        ns = self.namespace(namespace)
        if not category and not session_id:
            try:
                return self.graph.list_items(self.space(ns), kind_filter=entries.KIND, page_size=1).total_count
            except NotFound:
                return 0
        return len(self._matching(ns, category, session_id))

    def recall(self, *, query: object, limit: int = 5, namespace: str | None = None, since: object = None,
               until: object = None, category: str | None = None, session_id: str | None = None) -> list[Entry]:
        """The namespace's entries that best match ``query``, with their 0..1 score (relevance, time decay
        unless core, importance; superseded entries after the ones replacing them)."""
        if not isinstance(query, str) or len(query) > entries.MAX_QUERY:
            raise InvalidArgument(f"query: give a string of at most {entries.MAX_QUERY} characters", field="query")
        _bounded(limit, "limit", 1, MAX_LIMIT)
        ns = self.namespace(namespace)
        start, end = entries.check_window(since, until)
        equals = []
        categories: tuple[str, ...] = ()
        if category:
            categories = (entries.parse_category(category),)
            equals.append(("category", categories[0]))
        if session_id:
            equals.append(("session_id", entries.check_session_id(session_id)))
        space = self.space(ns)
        try:
            self.graph.get_space(space)
        except NotFound:
            return []
        ranked = self.recaller.ranked(RecallQuery(
            query=query, project=self.project, spaces=(space,), kinds=(entries.KIND,), memory_types=categories,
            limit=limit, exact_spaces=True, since=start, until=end, metadata_equals=tuple(equals),
            pool=FILTERED_POOL if session_id or start or end else max(limit * RECALL_POOL_FACTOR, 50)))
        return [entries.entry_from(c.item_kref, c.item_kref.rsplit("/", 1)[1].rsplit(".", 1)[0], r.metadata,
                                   r.created_at, ns, c.score) for c, r in ranked]

    def export(self, *, namespace: str | None = None, since: object = None, until: object = None
               ) -> Iterator[Entry]:  # not a generator itself: bad arguments raise at the call
        """Every live entry of the namespace created in [since, until], oldest first, read a page at a time
        (so that an export of any size streams). The arguments are checked before the first entry."""
        ns = self.namespace(namespace)
        start, end = entries.check_window(since, until)
        items = self._items(ns)[::-1]

        def entries_of() -> Iterator[Entry]:
            for item, revision in self._with_revisions(items):
                entry = self._entry(item, revision, ns)
                if entries.in_window(entry.timestamp, start, end):
                    yield entry

        return entries_of()

    # -- forget and purge -------------------------------------------------------------------------------
    def forget(self, key: object, namespace: str | None = None) -> Entry:
        """Deprecate the key's entry: it leaves get, list, recall and the counts, and stays in the graph (an
        ``item.deprecated`` event says so); storing the key again brings it back."""
        ns = self.namespace(namespace)
        checked = entries.check_key(key)
        with self._lock:
            found = self._find(ns, checked)
            if found is None or found.revision is None:
                raise NotFound(f"key: no entry with key {checked!r} in namespace {ns!r}", field="key")

            def forget() -> None:
                self.graph.update_item_metadata(found.item.kref, {"deprecation_reason": FORGOTTEN})
                self.graph.set_deprecated(found.item.kref, True)

            self.graph.atomic(forget)
        return self._entry(found.item, found.revision, ns)

    def purge_namespace(self, namespace: str | None = None) -> int:
        """Delete every entry of the namespace for real (forgotten ones too); the other namespaces stay."""
        ns = self.namespace(namespace)
        with self._lock:
            return self._delete(ns, lambda _: True)

    def purge_session(self, session_id: object, namespace: str | None = None) -> int:
        """Delete for real every entry of the namespace stored with this session id (forgotten ones too)."""
        ns = self.namespace(namespace)
        session = entries.check_session_id(session_id)
        if not session:
            raise InvalidArgument("session_id: give the session whose entries to purge", field="session_id")
        with self._lock:
            return self._delete(ns, lambda meta: meta.get("session_id") == session)

    def _delete(self, ns: str, chosen: Any) -> int:
        space = self.space(ns)
        try:
            items = every_item(lambda cursor: self.graph.list_items(
                space, kind_filter=entries.KIND, include_deprecated=True, page_size=PAGE, cursor=cursor))
        except NotFound:
            return 0
        doomed: list[str] = []
        for start in range(0, len(items), PAGE):
            current = self.graph.current_revisions([i.kref for i in items[start:start + PAGE]])
            doomed += [i.kref for i in items[start:start + PAGE] if chosen(current[i.kref].metadata
                                                                           if i.kref in current else {})]
        for start in range(0, len(doomed), PURGE_CHUNK):
            purge_items(self.graph, self.writer.artifact_root, doomed[start:start + PURGE_CHUNK])
        return len(doomed)

    # -- health -----------------------------------------------------------------------------------------
    def health(self, namespace: str | None = None) -> dict[str, Any]:
        """health_check: the graph answers a read of the namespace and the search index is open."""
        ns = self.namespace(namespace)
        try:
            count = self.count(namespace=ns)
        except Exception:  # the answer is a plain sentence; the log has the exception
            log.exception("memory health check: reading namespace %r failed", ns)
            return {"healthy": False, "namespace": ns, "entries": None,
                    "detail": "the memory did not answer a read; see the appliance log"}
        return {"healthy": True, "namespace": ns, "entries": count, "detail": "graph and index answer"}


def _bounded(value: int, field: str, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidArgument(f"{field}: give a whole number from {low} to {high}", field=field)


@contextlib.contextmanager
def _naming_entry(index: int) -> Iterator[None]:
    """An error about one entry of a batch names it: field ``entries[3].category``, and a message that starts
    with that (``entries[3]: …`` when the error names no field)."""
    try:
        yield
    except KumihoError as exc:
        where = f"entries[{index}].{exc.field}" if exc.field else f"entries[{index}]"
        if exc.field and exc.message.startswith(exc.field):  # "category: …" → "entries[3].category: …"
            message = f"entries[{index}].{exc.message}"
        else:
            message = f"{where}: {exc.message}"
        raise type(exc)(message, field=where) from None
