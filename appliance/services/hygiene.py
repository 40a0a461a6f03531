"""The hygiene pass over the Memory API's entries, as a job of kind ``hygiene`` (rules: ``appliance.memory.hygiene``).

A pass reads every entry (items of kind ``memory`` under ``/<project>/Memory``), plans with the pure rules,
and applies the plan in batches of at most ``MAX_CHANGES_PER_TRANSACTION`` changes, one graph transaction each.
Inside its transaction a batch reads each entry again and applies a change only if the rules still call for it
(an entry stored again since the plan is left alone), so a pass may run beside agents' writes. A crash or a
cancel between batches leaves whole batches applied and the rest untouched; the next pass plans from what the
graph holds and finishes the work. With ``snapshot_on_hygiene`` the ``before_pass`` hook (a snapshot) runs
first, and a pass whose snapshot fails changes nothing.

The MCP tools' memories elsewhere in the graph are not hygiene's: Dream State manages their lifecycle.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from appliance.config import MemorySettings
from appliance.core.caller import Caller, calling, current_caller
from appliance.core.model import Item, Revision, every_item
from appliance.errors import KumihoError, StorageError
from appliance.graph import GraphStore
from appliance.jobs import Job, JobQueue
from appliance.memory import entries, hygiene
from appliance.memory.namespaces import MEMORY_SPACE, namespace_of
from appliance.services.purge import purge_items

log = logging.getLogger(__name__)
JOB_KIND = "hygiene"
READ_CHUNK = 500  # entries read per graph read
MAX_LISTED = 100  # changes a result lists (the counts are complete)

BeforePass = Callable[[], object]  # e.g. Snapshots.take bound to a reason; returns the snapshot's file


class SnapshotFailed(StorageError):
    """The snapshot a pass takes first (``snapshot_on_hygiene``) failed: the pass changed nothing."""


def rules_of(settings: MemorySettings) -> hygiene.Rules:
    return hygiene.Rules(
        archive_after_days=settings.archive_after_days, purge_after_days=settings.purge_after_days,
        conversation_retention_days=settings.conversation_retention_days,
        retention_days_by_category=dict(settings.policy.retention_days_by_category),
        read_only_namespaces=frozenset(settings.policy.read_only_namespaces))


class HygieneService:
    def __init__(self, graph: GraphStore, jobs: JobQueue, settings: MemorySettings, project: str,
                 artifact_root: Path, *, before_pass: BeforePass | None = None,
                 clock: Callable[[], datetime] = lambda: datetime.now(UTC),
                 batch_size: int = hygiene.MAX_CHANGES_PER_TRANSACTION) -> None:
        self.graph, self.jobs, self.settings, self.project = graph, jobs, settings, project
        self.artifact_root = artifact_root  # a purged entry's files go too (appliance.services.purge)
        self.before_pass = before_pass  # the lead wires appliance.backup.snapshots.Snapshots.take here
        self.clock, self.batch_size = clock, batch_size

    def submit(self, *, dry_run: bool = False, caller: Caller | None = None) -> Job:
        """Queue a pass (at most one queued or running: a second request gets the active one)."""
        who = caller or current_caller()
        if who.door == "internal":
            who = Caller("maintenance", "scheduler", "hygiene")
        what = "hygiene dry run: what a pass would archive and purge" if dry_run else "hygiene pass"
        return self.jobs.submit(JOB_KIND, lambda job: self._as(who, job, dry_run), description=what,
                                key="hygiene-dry-run" if dry_run else JOB_KIND)  # a dry run only reads

    def _as(self, who: Caller, job: Job, dry_run: bool) -> dict[str, Any]:
        with calling(who):
            return self.run(job, dry_run=dry_run)

    def run(self, job: Job | None = None, *, dry_run: bool = False) -> dict[str, Any]:
        """One pass; the result is ``{archived, purged, skipped_read_only, snapshot, dry_run, complete,
        changes}`` (a dry run counts what it would do and changes nothing)."""
        snapshot = None if dry_run else self._snapshot()
        now = self.clock()
        plan = hygiene.plan(self.entries(), rules_of(self.settings), now)
        changes = plan.changes
        result: dict[str, Any] = {
            "archived": 0, "purged": 0, "skipped_read_only": len(plan.skipped_read_only), "snapshot": snapshot,
            "dry_run": dry_run, "complete": True,
            "changes": ([_listed(d) for d in changes] + [_listed(d, skipped=True) for d in plan.skipped_read_only]
                        )[:MAX_LISTED]}
        if dry_run:
            result.update(archived=len(plan.archive), purged=len(plan.purge))
            _progress(job, len(changes), len(changes), "dry run: nothing changed")
            return result
        done = 0
        _progress(job, 0, len(changes), f"{len(plan.archive)} to archive, {len(plan.purge)} to purge")
        for batch in hygiene.batches(changes, self.batch_size):
            if job is not None and job.cancel.is_set():
                result["complete"] = False  # the next pass finishes: it plans from what the graph holds
                break
            archived: list[str] = []
            purged = purge_items(self.graph, self.artifact_root,
                                 [d.entry.kref for d in batch if d.action == "purge"],
                                 functools.partial(self._apply, batch, now, archived))
            result["archived"] += len(archived)
            result["purged"] += len(purged)
            done += len(batch)
            _progress(job, done, len(changes), f"archived {result['archived']}, purged {result['purged']}")
        log.info("hygiene: archived %d, purged %d, skipped %d in read-only namespaces", result["archived"],
                 result["purged"], result["skipped_read_only"])
        return result

    def entries(self) -> list[hygiene.Entry]:
        """Every Memory API entry (deprecated ones too) with what the rules need."""
        prefix = f"{self.project}/{MEMORY_SPACE}/"
        items = every_item(lambda cursor: self.graph.search_items(
            context_filter=prefix, kind_filter=entries.KIND, include_deprecated=True, page_size=1000, cursor=cursor))
        found: list[hygiene.Entry] = []
        for start in range(0, len(items), READ_CHUNK):
            chunk = items[start:start + READ_CHUNK]
            current = self.graph.current_revisions([item.kref for item in chunk])
            found += [e for item in chunk if (e := self._entry(item, current.get(item.kref))) is not None]
        return found

    def _entry(self, item: Item, revision: Revision | None) -> hygiene.Entry | None:
        namespace = namespace_of(self.project, item.space_path)
        category = revision.metadata.get("category", "") if revision is not None else ""
        if revision is None or namespace is None or not category:
            return None  # not an entry the Memory API wrote: hygiene leaves it alone
        return hygiene.Entry(item.kref, namespace, category, _moment(revision.created_at), item.deprecated,
                             hygiene.archived_at(item.metadata))

    def _apply(self, batch: list[hygiene.Decision], now: datetime, archived: list[str]) -> list[str]:
        """Inside the batch's transaction: archive each planned entry, if the rules still call for it (into
        ``archived``); answer the planned purges the rules still call for (``purge_items`` deletes them, in the
        same transaction, and then their files)."""
        rules, purged = rules_of(self.settings), []
        current = self.graph.current_revisions([planned.entry.kref for planned in batch])  # one read
        for planned in batch:
            kref = planned.entry.kref
            try:
                item = self.graph.get_item(kref)
            except KumihoError:
                continue  # gone since the plan (purged by someone else)
            entry = self._entry(item, current.get(kref))
            decision = hygiene.decide(entry, rules, now) if entry is not None else None
            if decision is None or decision.action != planned.action:
                continue  # changed since the plan (stored again, restored): the rules no longer call for it
            if decision.action == "purge":
                purged.append(kref)
            else:
                self.graph.update_item_metadata(kref, hygiene.archive_mark(decision, now))
                self.graph.set_deprecated(kref, True)
                archived.append(kref)
        return purged

    def _snapshot(self) -> str | None:
        if not self.settings.snapshot_on_hygiene:
            return None
        if self.before_pass is None:
            raise SnapshotFailed("hygiene: [memory] snapshot_on_hygiene is set but this appliance cannot take "
                                 "snapshots; nothing was changed (set snapshot_on_hygiene = false to run without)")
        try:
            taken = self.before_pass()
        except KumihoError as exc:
            raise SnapshotFailed(f"hygiene: the snapshot before the pass failed ({exc.message}); nothing was "
                                 "changed") from exc
        except Exception as exc:  # its text may hold paths: the log has it
            log.exception("hygiene: the snapshot before the pass failed")
            raise SnapshotFailed(f"hygiene: the snapshot before the pass failed ({type(exc).__name__}; see the "
                                 "appliance log); nothing was changed") from exc
        return Path(str(taken)).name if taken is not None else None  # the file's name, never a full path


def _listed(decision: hygiene.Decision, *, skipped: bool = False) -> dict[str, str]:
    entry = decision.entry
    return {"kref": entry.kref, "namespace": entry.namespace, "category": entry.category,
            "action": "skip" if skipped else decision.action,
            "reason": f"{decision.reason}; namespace {entry.namespace} is read-only" if skipped else decision.reason}


def _progress(job: Job | None, done: int, total: int, note: str) -> None:
    if job is not None:
        job.progress(done, total, note)


def _moment(text: str) -> datetime:
    moment = datetime.fromisoformat(text)
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)
