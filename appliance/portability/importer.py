"""Import: a JSON Lines export into this appliance's graph (docs/export-format.md).

Two passes over the file. The check reads it whole before anything is written: each line's shape and bounds
(``records.check_line``), the header, the closing ``end`` line (a file cut short is refused), that every
reference names a record earlier in the file or one the store holds, and how each record compares with the
store: new, already there (unchanged: skipped, so a second import of the same file writes nothing), or in
conflict (same kref, other content: the whole import is refused, listing them), and whether writing it would
change a namespace the operator made read-only (refused too: an import is a write like any other). The write
pass then goes through the file again in batches of ``BATCH`` records, one transaction each: each batch is
compared with the store again inside its own write transaction, before it loads anything, so that a write
that landed since the check (the same record: skipped; another version of it, or the deletion of a record it
refers to: the import stops there) is seen rather than making the bulk load fail. The artifact files a batch
carries are written (fsynced) inside that transaction, before it commits; each batch adds one row to the
audit trail.

Projects and spaces are containers, known by name and path: one the store holds with other details (another
appliance made its own memory project at another time) keeps the store's record and is counted as ``kept``,
not as a conflict; what they hold is compared record by record. And a project the store holds but that holds
nothing (the memory project an appliance creates at its first start) is adopted, taking the file's record, its
root space's record and its creation event, so that an export imported into a fresh appliance exports the
same again.
"""

from __future__ import annotations

import base64
import hashlib
import json
import logging
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from appliance.backup.archive import sha256_of
from appliance.errors import Conflict, InvalidArgument, PermissionDenied, StorageError
from appliance.fsutil import fsync_dir, inside, write_durably
from appliance.graph import GraphStore
from appliance.graph.portable import LoadBatch
from appliance.memory import policy
from appliance.portability import records
from appliance.portability.records import Checked, LineError, Record

BATCH = 1000  # records per write transaction (and per comparison with the store)
WRITE_ATTEMPTS = 3
MAX_REPORTED = 20  # problems listed in a refusal (all are counted)
log = logging.getLogger(__name__)
Progress = Callable[[int, int, str], None]  # (bytes done, bytes to do, what now)

# the krefs a record names: what it changes (a read-only namespace's, for the guard) and what the audit row lists
_KREFS = {"project": ("kref",), "space": ("kref",), "item": ("kref",), "revision": ("kref",),
          "tag": ("revision_kref",), "artifact": ("kref",), "edge": ("source_kref", "target_kref"),
          "bundle_member": ("bundle_kref",), "event": ("kref",)}
_PARTLY = ("; nothing of this batch was written, the batches before it were. Import the file again to complete it "
           "once the cause is fixed (records already written are skipped)")
_LISTS = {"project": "projects", "space": "spaces", "item": "items", "revision": "revisions", "tag": "tags",
          "artifact": "artifacts", "edge": "links", "bundle_member": "members", "event": "events"}


@dataclass
class _Seen:
    """What the check learnt: the file's keys (digests, not records), references still to find in the store,
    and the projects (with their creation events) an import adopts."""

    defined: dict[bytes, int] = field(default_factory=dict)  # key digest → line
    pending: dict[tuple[str, ...], tuple[int, str]] = field(default_factory=dict)
    adopted: set[str] = field(default_factory=set)
    adopted_events: set[int] = field(default_factory=set)


@dataclass
class Outcome:
    records: int = 0
    by_type: dict[str, int] = field(default_factory=dict)
    new: dict[str, int] = field(default_factory=dict)
    unchanged: int = 0
    kept: int = 0  # projects and spaces the appliance holds with other details: its own stay
    adopted: int = 0
    files_written: int = 0
    files_not_carried: int = 0
    errors: list[str] = field(default_factory=list)
    error_count: int = 0
    conflicts: list[str] = field(default_factory=list)
    conflict_count: int = 0
    read_only: list[str] = field(default_factory=list)  # records that would change a read-only namespace
    read_only_count: int = 0
    read_only_names: set[str] = field(default_factory=set)

    def error(self, message: str) -> None:
        self.error_count += 1
        if len(self.errors) < MAX_REPORTED:
            self.errors.append(message)

    def conflict(self, message: str) -> None:
        self.conflict_count += 1
        if len(self.conflicts) < MAX_REPORTED:
            self.conflicts.append(message)

    def refuse(self, namespace: str, message: str) -> None:
        self.read_only_count += 1
        self.read_only_names.add(namespace)
        if len(self.read_only) < MAX_REPORTED:
            self.read_only.append(message)

    def summary(self, dry_run: bool) -> dict[str, Any]:
        return {"dry_run": dry_run, "records": self.records, "by_type": dict(sorted(self.by_type.items())),
                "new": dict(sorted(self.new.items())), "unchanged": self.unchanged, "kept": self.kept,
                "adopted": self.adopted,
                "artifact_files_written": self.files_written, "artifact_files_not_carried": self.files_not_carried}


@dataclass(frozen=True)
class _Verdict:
    status: str  # new | same | kept | adopt | conflict
    detail: str = ""
    adopt_seq: int = -1  # the store's own creation event an adopted project's event replaces


class Importer:
    def __init__(self, graph: GraphStore, artifact_root: Path, progress: Progress | None = None,
                 cancelled: Callable[[], bool] | None = None) -> None:
        self.graph = graph
        self.root = artifact_root.resolve()
        self.progress = progress or (lambda done, total, note: None)
        self.cancelled = cancelled or (lambda: False)

    def run(self, path: Path, dry_run: bool = False) -> dict[str, Any] | None:
        """Check the whole file, then (unless ``dry_run``) write it; the counts, or None when cancelled (between
        two batches: the batches before are written). InvalidArgument (lines and fields) or Conflict (records
        the store holds otherwise) before anything is written."""
        size = path.stat().st_size
        total = size if dry_run else 2 * size
        seen, outcome = _Seen(), Outcome()
        try:
            for offset, chunk in _chunks(path, outcome):
                for (line, checked), verdict in zip(chunk, self._verdicts(chunk, seen), strict=True):
                    self._note(line, checked, verdict, seen, outcome)
                self.progress(offset, total, "checking")
                if self.cancelled():
                    return None
        except LineError as exc:  # the file as a whole (its header, its end): the check stops here
            outcome.error(exc.message)
        if not outcome.error_count:
            self._resolve_pending(seen, outcome)
        if outcome.error_count:
            raise InvalidArgument(_listing(f"the file cannot be imported ({outcome.error_count} problem(s)); "
                                           "nothing was written", outcome.errors, outcome.error_count))
        if outcome.read_only_count:
            name = sorted(outcome.read_only_names)[0]
            refused = policy.refusal(name, " by this import")
            raise PermissionDenied(_listing(f"{refused.message}. {outcome.read_only_count} record(s) of the file "
                                            "would change a read-only namespace", outcome.read_only,
                                            outcome.read_only_count))
        if outcome.conflict_count:
            raise Conflict(_listing(f"{outcome.conflict_count} record(s) differ from what this appliance holds "
                                    "under the same kref; nothing was written. Remove them from the file, or "
                                    "import into another data directory", outcome.conflicts,
                                    outcome.conflict_count))
        if dry_run:
            return outcome.summary(True)
        written = Outcome()
        seen.adopted_events.clear()
        for offset, chunk in _chunks(path, Outcome()):
            self._write_with_retries(chunk, seen, written)
            self.progress(size + offset, total, "writing")
            if self.cancelled():
                return None
        outcome.files_written = written.files_written
        return outcome.summary(False)

    # -- the check --------------------------------------------------------------------------------------
    def _note(self, line: int, checked: Checked, verdict: _Verdict, seen: _Seen, outcome: Outcome) -> None:
        record = checked.record
        kind = record["type"]
        digest = _digest(checked.key)
        if digest in seen.defined and kind != "event":
            outcome.error(f"line {line}: {records.describe(checked.key)} appears twice in the file "
                          f"(also line {seen.defined[digest]})")
        seen.defined.setdefault(digest, line)
        for key, name in checked.refs:
            if _digest(key) not in seen.defined and key not in seen.pending:
                seen.pending[key] = (line, name)
        outcome.records += 1
        outcome.by_type[kind] = outcome.by_type.get(kind, 0) + 1
        if kind == "artifact" and "content_base64" not in record.get("file", {"content_base64": ""}):
            outcome.files_not_carried += 1
        if verdict.status in ("new", "adopt") and (namespace := self._read_only(record)):
            outcome.refuse(namespace, f"line {line}: {records.describe(checked.key)} (namespace {namespace!r})")
        if verdict.status == "conflict":
            outcome.conflict(f"line {line}: {records.describe(checked.key)} {verdict.detail}")
        elif verdict.status == "same":
            outcome.unchanged += 1
        elif verdict.status == "kept":
            outcome.kept += 1
        elif verdict.status == "adopt":
            outcome.adopted += 1
        else:
            outcome.new[kind] = outcome.new.get(kind, 0) + 1

    def _resolve_pending(self, seen: _Seen, outcome: Outcome) -> None:
        """References to records the file does not define earlier: the store must hold them."""
        by_table: dict[str, list[tuple[str, ...]]] = {}
        for key in seen.pending:
            by_table.setdefault(key[0], []).append(key)
        for table, keys in by_table.items():
            for start in range(0, len(keys), BATCH):
                part = keys[start: start + BATCH]
                held = self.graph.portable_nodes(table, [k[1] for k in part])
                for key in part:
                    if key[1] not in held:
                        line, name = seen.pending[key]
                        outcome.error(f"line {line}, field {name}: {records.describe(key)} is neither in the file "
                                      "above this line nor in this appliance")

    def _read_only(self, record: Record) -> str | None:
        """The read-only namespace (``[memory.policy] read_only_namespaces``) writing ``record`` would change."""
        guard = self.graph.policy.read_only
        if guard is None or not guard.names:
            return None
        for name in _KREFS[record["type"]]:
            if record.get(name) and (namespace := guard.touched(record["type"] + ".imported", record[name])):
                return namespace
        return None

    # -- comparing a chunk with the store ------------------------------------------------------------------
    def _verdicts(self, chunk: list[tuple[int, Checked]], seen: _Seen) -> list[_Verdict]:
        held = self._held(chunk)
        verdicts = []
        for _, checked in chunk:
            record, key = checked.record, checked.key
            kind = record["type"]
            if kind == "artifact":
                file_problem = self._file_conflict(record)
                if file_problem:
                    verdicts.append(_Verdict("conflict", file_problem))
                    continue
            mine = self._comparable(record)
            theirs = held.get(key)
            if theirs is None:
                verdicts.append(self._absent(record, seen))
            elif theirs == mine:
                verdicts.append(_Verdict("same"))
            elif self._adoptable(record, seen):
                verdicts.append(_Verdict("adopt"))
            elif kind in ("project", "space"):  # a container the appliance holds: its own record stays
                verdicts.append(_Verdict("kept"))
            else:
                differing = sorted(name for name in mine if mine[name] != theirs.get(name))
                verdicts.append(_Verdict("conflict", "is held with other " + ", ".join(differing)))
        return verdicts

    def _absent(self, record: Record, seen: _Seen) -> _Verdict:
        """A record the store lacks: new, unless it is the creation event of a project being adopted."""
        if record["type"] == "event" and record["routing_key"] == "project.created":
            project = record["kref"][len("kref://"):]
            if project in seen.adopted:
                for node in self.graph.portable_creation_events(record["kref"]):
                    if int(node["seq"]) not in seen.adopted_events:
                        seen.adopted_events.add(int(node["seq"]))
                        return _Verdict("adopt", adopt_seq=int(node["seq"]))
        return _Verdict("new")

    def _adoptable(self, record: Record, seen: _Seen) -> bool:
        if record["type"] == "project" and (record["name"] in seen.adopted
                                            or not self.graph.portable_project_holds_anything(record["name"])):
            seen.adopted.add(record["name"])
            return True
        return record["type"] == "space" and record["parent_path"] is None and record["project"] in seen.adopted

    def _comparable(self, record: Record) -> Record:
        """The record as the store would give it back: an event without its sequence number, an artifact
        with the location its carried file gets here and without the file."""
        if record["type"] == "event":
            return {k: v for k, v in record.items() if k != "seq"}
        if record["type"] == "artifact":
            mine = {k: v for k, v in record.items() if k != "file"}
            if "file" in record:  # where _write_file puts it (inside() checks the path then)
                mine["location"] = str(self.root.joinpath(*record["file"]["path"].split("/")))
            return mine
        return record

    def _held(self, chunk: list[tuple[int, Checked]]) -> dict[tuple[str, ...], Record]:
        """The store's version of the chunk's records, by key (as export writes them)."""
        wanted: dict[str, set[str]] = {}
        for _, checked in chunk:
            record, key = checked.record, checked.key
            table = key[0]
            if table in ("Project", "Space", "Item", "Revision", "Artifact"):
                wanted.setdefault(table, set()).add(key[1])
            elif table == "tag":
                wanted.setdefault("tag", set()).add(record["item_kref"][len("kref://"):])
            elif table == "edge":
                wanted.setdefault("edge", set()).add(record["source_kref"][len("kref://"):].rsplit("?r=", 1)[0])
            elif table == "bundle_member":
                wanted.setdefault("bundle_member", set()).add(key[1])
        held: dict[tuple[str, ...], Record] = {}
        as_record = {"Project": records.project_record, "Space": records.space_record,
                     "Item": records.item_record, "Revision": records.revision_record,
                     "Artifact": lambda n: records.artifact_record(n, None)}
        for table, convert in as_record.items():
            for node in self.graph.portable_nodes(table, sorted(wanted.get(table, ()))).values():
                record = convert(node)
                held[records.identity(record)] = record
        if items := sorted(wanted.get("tag", ())):
            for item, spans in self.graph.portable_parts(items).tags.items():
                for span in spans:
                    record = records.tag_record(item, span)
                    held[records.identity(record)] = record
        for row in self.graph.portable_links(sorted(wanted.get("edge", ()))):
            record = records.edge_record(row)
            held[records.identity(record)] = record
        for row in self.graph.portable_members(sorted(wanted.get("bundle_member", ()))):
            record = records.member_record(row)
            held[records.identity(record)] = record
        times = [c.record["at"] for _, c in chunk if c.record["type"] == "event"]
        if times:
            for node in self.graph.portable_events_at(min(times), max(times)):
                record = records.event_record(node)
                held[records.identity(record)] = {k: v for k, v in record.items() if k != "seq"}
        return held

    # -- artifact files --------------------------------------------------------------------------------
    def _file_path(self, relative: str) -> Path:
        return inside(self.root, *relative.split("/"), field="file.path")

    def _file_conflict(self, record: Record) -> str:
        carried = record.get("file")
        if not carried or "content_base64" not in carried:
            return ""
        target = self._file_path(carried["path"])
        if target.exists() and sha256_of(target) != carried["sha256"]:
            return f"carries the file {carried['path']}, which exists in this appliance with other content"
        return ""

    def _write_file(self, record: Record, outcome: Outcome) -> Path | None:
        """Write a carried file (fsynced; its folder is the caller's to fsync); the folder, when written."""
        carried = record.get("file")
        if not carried or "content_base64" not in carried:
            return None
        target = self._file_path(carried["path"])
        if target.exists() and sha256_of(target) == carried["sha256"]:
            return None
        write_durably(target, base64.b64decode(carried["content_base64"]), sync_folder=False)
        outcome.files_written += 1
        return target.parent

    # -- the write pass ------------------------------------------------------------------------------------
    def _write_with_retries(self, chunk: list[tuple[int, Checked]], seen: _Seen, outcome: Outcome) -> None:
        """Kùzu may refuse a bulk commit while long reads run (it checkpoints at such a commit and waits a
        bounded time for readers); the batch was rolled back, so it is compared and written again."""
        for attempt in range(1, WRITE_ATTEMPTS + 1):
            adopted_events = set(seen.adopted_events)
            try:
                self._write(chunk, seen, outcome)
                return
            except StorageError:
                if attempt == WRITE_ATTEMPTS:
                    raise
                seen.adopted_events = adopted_events
                log.warning("import: a batch was rolled back by the graph store; writing it again (%d)", attempt)
                time.sleep(attempt)

    def _write(self, chunk: list[tuple[int, Checked]], seen: _Seen, outcome: Outcome) -> None:
        """One batch, decided inside its own write transaction (``portable_load`` runs ``prepare`` there): a
        write that landed since the check is seen, so a record someone else wrote the same is skipped, and one
        written otherwise, or a reference deleted meanwhile, stops the import before this batch loads anything."""
        def prepare() -> LoadBatch:
            verdicts = self._verdicts(chunk, seen)
            for (line, checked), verdict in zip(chunk, verdicts, strict=True):  # before any file is written
                if verdict.status == "conflict":  # the store changed since the check
                    raise Conflict(f"line {line}: {records.describe(checked.key)} {verdict.detail} (it changed "
                                   f"while the import ran){_PARTLY}")
                if verdict.status in ("new", "adopt") and (namespace := self._read_only(checked.record)):
                    raise policy.refusal(namespace, f" from line {line} on (the batches before it were)")
            self._still_there(chunk, verdicts)
            batch = LoadBatch()
            folders: set[Path] = set()
            for (_, checked), verdict in zip(chunk, verdicts, strict=True):
                record = checked.record
                if verdict.status in ("same", "kept"):
                    continue
                row = records.to_row(self._comparable(record) if record["type"] == "artifact" else record)
                if record["type"] != "event" or verdict.status == "adopt":  # a new event: its own seq says it
                    batch.changes.append((f"{record['type']}.{'adopted' if verdict.status == 'adopt' else 'imported'}",
                                          _kref_of(record)))
                if verdict.status == "adopt":
                    kind = record["type"]
                    if kind == "event":
                        batch.adopt_events.append({"seq": verdict.adopt_seq, **row})
                    else:
                        getattr(batch, "adopt_projects" if kind == "project" else "adopt_spaces").append(row)
                    continue
                if record["type"] == "artifact" and (folder := self._write_file(record, outcome)) is not None:
                    folders.add(folder)
                getattr(batch, _LISTS[record["type"]]).append(row)
            for folder in sorted(folders):  # the files' names are on disk before the commit that points to them
                fsync_dir(folder)
            return batch

        self.graph.portable_load(prepare)

    def _still_there(self, chunk: list[tuple[int, Checked]], verdicts: list[_Verdict]) -> None:
        """Every reference of a record this batch writes names a record of this batch or one the store still
        holds (the check found it; a delete since then would make the bulk load fail)."""
        here = {checked.key for _, checked in chunk}
        wanted: dict[tuple[str, ...], tuple[int, str]] = {}
        for (line, checked), verdict in zip(chunk, verdicts, strict=True):
            if verdict.status in ("new", "adopt"):
                for key, name in checked.refs:
                    if key not in here:
                        wanted.setdefault(key, (line, name))
        by_table: dict[str, list[tuple[str, ...]]] = {}
        for key in wanted:
            by_table.setdefault(key[0], []).append(key)
        for table, keys in sorted(by_table.items()):
            held = self.graph.portable_nodes(table, [key[1] for key in keys])
            for key in keys:
                if key[1] not in held:
                    line, name = wanted[key]
                    raise Conflict(f"line {line}, field {name}: {records.describe(key)} is no longer in this "
                                   f"appliance (it was deleted while the import ran){_PARTLY}")


def _chunks(path: Path, outcome: Outcome) -> Iterator[tuple[int, list[tuple[int, Checked]]]]:
    """(bytes read so far, up to BATCH checked records); line errors go to ``outcome`` (the check goes on to
    list more of them), and a problem with the file as a whole (header, end line) raises at once."""
    chunk: list[tuple[int, Checked]] = []
    ended = 0
    with path.open("rb") as handle:
        number = 0
        while True:
            text = handle.readline(records.MAX_LINE_BYTES + 1)
            if not text:
                break
            number += 1
            if not text.endswith(b"\n"):
                if len(text) > records.MAX_LINE_BYTES:
                    raise LineError(number, None, f"longer than {records.MAX_LINE_BYTES} bytes: not a record "
                                    "this format writes")
                raise LineError(number, None, "the file ends in the middle of this line: it was cut short "
                                "(truncated); export it again")
            if ended:
                raise LineError(number, None, f"a line after the end line (line {ended}); the file was joined "
                                "with something else")
            if number == 1:
                try:
                    header = json.loads(text)
                except ValueError:
                    header = None
                records.check_header(header)
                continue
            if _is_end(text):
                ended = number
                _check_end(number, text, number - 2)  # every line between the header and this one
                continue
            try:
                chunk.append((number, records.check_line(number, text)))
            except LineError as exc:
                outcome.error(exc.message)
            if len(chunk) >= BATCH:
                yield handle.tell(), chunk
                chunk = []
        if number == 0:
            raise LineError(1, "format", "the file is empty: not a kumiho-ce export")
        if not ended:
            raise LineError(number + 1, None, 'the file ends without its closing {"type": "end"} line: it was '
                            "cut short (truncated); export it again")
        yield handle.tell(), chunk


def _is_end(text: bytes) -> bool:
    if b'"end"' not in text:  # the cheap test first: every record line is parsed again by check_line
        return False
    try:
        value = json.loads(text)
    except ValueError:
        return False
    return isinstance(value, dict) and value.get("type") == "end"


def _check_end(number: int, text: bytes, seen: int) -> None:
    try:
        value = json.loads(text)
    except ValueError:
        value = None
    if not isinstance(value, dict) or set(value) != {"type", "records"} or value["records"] != seen:
        raise LineError(number, "records", f"the end line does not match the file ({seen} records above it): "
                        "records were removed or added by hand")


def _kref_of(record: Record) -> str:
    return str(record.get(_KREFS[record["type"]][0]) or "")


def _digest(key: tuple[str, ...]) -> bytes:
    return hashlib.blake2b("\x00".join(key).encode("utf-8", "surrogatepass"), digest_size=16).digest()


def _listing(title: str, lines: list[str], count: int) -> str:
    more = f"\n… and {count - len(lines)} more" if count > len(lines) else ""
    return title + ":\n" + "\n".join(lines) + more
