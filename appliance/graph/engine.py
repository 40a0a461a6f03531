"""The Kùzu engine: one database, one writer thread, a pool of reader connections.

Kùzu refuses a second concurrent write transaction instead of queueing it, so every write is a job on one
writer thread and runs as one transaction (all or nothing). Reads take a connection from a small pool and
run concurrently with the writer. Kùzu's exceptions become ``StorageError`` here.
"""

from __future__ import annotations

import contextlib
import contextvars
import functools
import logging
import queue
import re
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from pathlib import Path
from typing import Any, TypeVar, cast

import kuzu

from appliance.errors import DataDirError, KumihoError, StorageError

log = logging.getLogger(__name__)
T = TypeVar("T")
_STOP = object()
_HOLD = object()  # marks a job that runs between transactions (``KuzuEngine.hold``)
# the number of the last transaction the current thread (or task) committed through ``KuzuEngine.write``
_last_commit: contextvars.ContextVar[int] = contextvars.ContextVar("kuzu_last_commit", default=0)
CHECKPOINT_WAL_BYTES = 16 * 1024 * 1024  # Kùzu's own threshold: a larger write-ahead log is checkpointed
IDLE_CHECKPOINT_SECONDS = 1.0  # how soon an idle writer tries a checkpoint that is due
READS_DRAIN_SECONDS = 10.0  # how long a postponed checkpoint waits for the reads in flight to end
HELD_CHECKPOINT_BACKOFF_SECONDS = 30.0  # after such a wait fails, plain tries only for this long
SLOW_READ_SECONDS = 5.0  # Kùzu's own wait for reads before a checkpoint: a longer read is logged
# Up to this many rows are found by one primary-key lookup each (~0.5 ms); more, by one scan of the table. Kùzu
# 0.11 uses the key index for `{id: $id}` but not for `IN` lists or `UNWIND … {id: id}`: those scan the table
# (~0.1-0.3 s at 100k memories on a quiet machine, seconds under load, on the single writer or holding a
# checkpoint off). ``Tx.by_keys`` chooses.
KEY_LOOKUPS_UP_TO = 500


class _Written(Future[T]):
    """A write job's future, which also carries the number of the commit that made it durable."""

    commit = 0


class Connection:
    """One Kùzu connection and the statements compiled on it, each compiled once.

    Kùzu (0.11) keeps every statement a connection compiles until the connection closes, and its Python driver
    compiles a parameterised query anew on every call: ~6-22 KB per call, never given back (RSS grew ~0.7 MB
    per stored memory). So each query text is compiled once per connection and reused. A statement is compiled
    for its parameters' types (Kùzu casts later values to them, and crashes on a null list), so the cache key
    is the text plus the shape of the parameters. When more than ``max_statements`` were compiled, the owner
    reopens the connection at its next idle moment (``recycle_if_full``): only that frees them.
    """

    def __init__(self, db: kuzu.Database, max_statements: int) -> None:
        self._db = db
        self.max_statements = max_statements
        self._conn = kuzu.Connection(db)
        self._statements: dict[tuple[str, Any], kuzu.PreparedStatement] = {}
        self.compiled = 0  # statements compiled over this object's life (tests count them)
        self.executed = 0  # statements run over this object's life (tests and benchmarks count them)
        self.reopened = 0

    def execute(self, query: str, params: dict[str, Any]) -> kuzu.QueryResult:
        self.executed += 1
        if not params:  # the driver runs these without keeping a compiled statement
            return self._conn.execute(query)  # type: ignore[return-value]  # one statement: one result, not a list
        key = (query, _shape(params))
        statement = self._statements.get(key)
        if statement is None:
            statement = kuzu.PreparedStatement(self._conn, query, params)
            self.compiled += 1
            if not statement.is_success():  # not cached: a refused text is an error, not a statement
                raise RuntimeError(statement.get_error_message())
            self._statements[key] = statement
        return self._conn.execute(statement, params)  # type: ignore[return-value]  # one statement: one result

    def reattach(self, db: kuzu.Database) -> None:
        """Open this connection anew on ``db`` (the engine reopened its database); its statements are dropped."""
        self._statements.clear()
        self._db = db
        self._conn = kuzu.Connection(db)
        self.reopened += 1

    def recycle_if_full(self) -> None:
        """Reopen the connection when it holds too many compiled statements (call outside a transaction)."""
        if len(self._statements) > self.max_statements:
            log.info("reopening a graph connection that compiled %d statements", len(self._statements))
            self._statements.clear()
            self._conn.close()
            self._conn = kuzu.Connection(self._db)
            self.reopened += 1

    def close(self) -> None:
        self._statements.clear()
        self._conn.close()


def _shape(value: Any) -> Any:
    """The types Kùzu infers for a parameter value, as a hashable key (values themselves do not matter)."""
    if isinstance(value, dict):
        return tuple((key, _shape(value[key])) for key in sorted(value))
    if isinstance(value, list | tuple):
        return frozenset(_shape(item) for item in value)
    return type(value)


class Tx:
    """Query helpers over one connection; inside ``engine.write`` they share one transaction."""

    def __init__(self, conn: Connection) -> None:
        self._conn = conn
        self.wrote = False  # whether a statement that changes data ran (a rollback then needs a checkpoint)
        self.copied = False  # whether a COPY ran (a rollback then reopens the database: see KuzuEngine._rollback)
        self.updated_rels: set[str] = set()  # relationship tables whose rows a SET or DELETE named (see ``copy``)
        self.committed: list[Callable[[], None]] = []  # run once this write transaction has committed
        self.committing: list[Callable[[Tx], None]] = []  # run inside it, after its job, just before COMMIT

    def after_commit(self, action: Callable[[], None]) -> None:
        """Run ``action`` on the writer thread once this transaction has committed (never after a rollback),
        before the engine's commit listeners: what a commit tells others (removed revisions) is known to them
        when they hear of the commit."""
        self.committed.append(action)

    def before_commit(self, action: Callable[[Tx], None]) -> None:
        """Run ``action`` inside this write transaction once its job has returned, just before COMMIT: what it
        writes commits (or rolls back) with the job's writes (the audit trail records a transaction this way)."""
        self.committing.append(action)

    def rows(self, query: str, params: dict[str, Any] | None = None) -> list[list[Any]]:
        # Kùzu refuses parameters a query does not use; callers may share one parameter dict.
        wanted = _parameters(query)
        self.wrote = self.wrote or _changes_data(query)
        self.updated_rels.update(_updated_rels(query))
        try:
            result = self._conn.execute(query, {k: v for k, v in (params or {}).items() if k in wanted})
            # rows are lists: rows_as_dict() is never set
            return cast("list[list[Any]]", result.get_all())
        except RuntimeError as exc:
            log.error("graph query failed: %s", exc)
            raise StorageError(f"the graph database refused the operation: {exc}") from exc

    def run(self, query: str, params: dict[str, Any] | None = None) -> None:
        self.rows(query, params)

    def by_keys(self, one: str, many: str, ids: list[str], params: dict[str, Any] | None = None,
                up_to: int | None = None) -> list[list[Any]]:
        """The rows of ``one`` (a query on ``$id``) for each of ``ids``, one primary-key lookup each, or, beyond
        ``up_to`` ids (``KEY_LOOKUPS_UP_TO`` by default), the rows of ``many`` (the same on ``$ids``) in one
        statement."""
        if len(ids) > (KEY_LOOKUPS_UP_TO if up_to is None else up_to):
            return self.rows(many, {**(params or {}), "ids": ids})
        return [row for key in ids for row in self.rows(one, {**(params or {}), "id": key})]

    def unwind(self, query: str, rows: list[Any], params: dict[str, Any] | None = None) -> None:
        """Run ``UNWIND $rows AS …`` for a non-empty batch (Kùzu cannot type an empty list parameter)."""
        if rows:
            self.run(query, {**(params or {}), "rows": rows})

    def copy(self, table: str, columns: str, rows: list[Any], params: dict[str, Any] | None = None) -> None:
        """Bulk-load ``rows`` into ``table`` with ``COPY … FROM (UNWIND $rows AS row RETURN columns)``.

        It runs inside the transaction (a rollback undoes it) and, for relationships, is ~25× faster than
        ``UNWIND … MATCH (a {id}), (b {id}) CREATE``, which Kùzu plans as scans. ``columns`` lists every
        column of the table in order (``from``/``to`` keys first for relationships), aliased uniquely. Both are
        constants of the calling code, so the query texts stay a small fixed set (each is compiled once).

        A transaction that SETs or DELETEs rows of a relationship table and then COPYs into that table crashes
        Kùzu 0.11.3 when it is rolled back (inside ROLLBACK itself), so that order is refused: COPY first.
        """
        if table in self.updated_rels:  # refused before it runs: the rollback of this transaction would crash
            raise StorageError(f"the graph cannot bulk-load {table} in a transaction that has changed rows of "
                               f"{table} (Kùzu 0.11 crashes rolling that back): load first, then change")
        if rows:
            self.copied = True  # before it runs: a COPY that fails part-way is rolled back like one that ran
            self.run(f"COPY {table} FROM (UNWIND $rows AS row RETURN {columns})", {**(params or {}), "rows": rows})

    def one(self, query: str, params: dict[str, Any] | None = None) -> list[Any] | None:
        found = self.rows(query, params)
        return found[0] if found else None

    def returned_row(self, query: str, params: dict[str, Any] | None = None) -> list[Any]:
        """The row of a statement that always returns one (``CREATE … RETURN``, or ``SET … RETURN`` on a node
        this transaction has just found)."""
        row = self.one(query, params)
        if row is None:
            raise StorageError("the graph database returned no row for a statement that always returns one")
        return row

    def scalar(self, query: str, params: dict[str, Any] | None = None) -> Any:
        row = self.one(query, params)
        return row[0] if row else None


@functools.lru_cache(maxsize=1024)
def _parameters(query: str) -> frozenset[str]:
    return frozenset(re.findall(r"\$(\w+)", query))


@functools.lru_cache(maxsize=1024)
def _updated_rels(query: str) -> frozenset[str]:
    """The relationship tables (``[e:NAME]`` patterns) of a statement that SETs or DELETEs: an over-estimate
    (the statement may change only a node it reached through them), which is the safe side for ``Tx.copy``."""
    if re.search(r"\b(SET|DELETE|REMOVE)\b", query, re.IGNORECASE) is None:
        return frozenset()
    return frozenset(re.findall(r"\[\w*:(\w+)", query))


@functools.lru_cache(maxsize=1024)
def _changes_data(query: str) -> bool:
    return re.search(r"\b(CREATE|MERGE|SET|DELETE|DETACH|REMOVE|COPY|DROP|ALTER)\b", query, re.IGNORECASE) is not None


class KuzuEngine:
    def __init__(
        self, path: Path, *, buffer_pool_mb: int = 256, readers: int = 4, read_only: bool = False,
        max_statements: int = 256,
    ) -> None:
        if not read_only:
            path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._db = kuzu.Database(
                str(path), buffer_pool_size=buffer_pool_mb * 1024 * 1024, read_only=read_only
            )
        except RuntimeError as exc:
            raise DataDirError(
                f"graph database {path} cannot be opened: {exc}. If another process holds it, stop that "
                "process; if it is damaged, restore a backup (kumiho-ce restore)."
            ) from exc
        self.path = path
        self._buffer_pool_mb = buffer_pool_mb
        self._wal = path.with_name(path.name + ".wal")
        self.connections = [Connection(self._db, max_statements) for _ in range(readers + 1)]
        self._readers: queue.SimpleQueue[Connection] = queue.SimpleQueue()
        for conn in self.connections[1:]:
            self._readers.put(conn)
        self._jobs: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self.read_only = read_only
        self._writer_conn = self.connections[0]
        self._writer = threading.Thread(target=self._write_loop, name="kuzu-writer", daemon=True)
        self._closed = False
        # Kùzu checkpoints inside COMMIT once its write-ahead log passes a threshold, and a checkpoint waits a
        # bounded time for every other transaction to end: under long reads the COMMIT then fails and the
        # write is lost to its caller. So the writer checkpoints itself, between transactions, and a
        # checkpoint that cannot run now is simply tried again later (tests/graph/test_checkpoint.py).
        self._checkpoint_due = False  # after a rolled-back write (see _rollback) or once the log is large
        self._checkpoints_postponed = 0  # tries that found reads running since the checkpoint fell due
        self._next_held_checkpoint = 0.0  # monotonic time before which no try holds reads back (after a failed one)
        self._tx = Tx(self._writer_conn)  # the writer thread's one Tx: nested jobs share its transaction
        self.on_commit: list[Callable[[], None]] = []  # called on the writer thread after each commit
        # committed write transactions, numbered from 1; counted before the listeners run, so a listener reads
        # the number of the commit it hears of (the search index tells its readers which commits it holds)
        self.commits = 0
        if not read_only:
            self._writer_conn.execute("CALL auto_checkpoint=false", {})
            self._writer.start()

    # -- writes ---------------------------------------------------------------------------------------
    def write(self, job: Callable[[Tx], T]) -> T:
        """Run ``job`` as one transaction on the writer thread and return its result (or raise)."""
        if threading.current_thread() is self._writer:
            return job(self._tx)  # nested call from inside a job: same transaction (and its `wrote`)
        if self._closed or self.read_only:
            raise StorageError("the graph store is closed or opened read-only")
        future: _Written[T] = _Written()
        # the job runs in the submitter's context: who is calling (appliance.core.caller) travels with it
        context = contextvars.copy_context()
        self._jobs.put((lambda tx: context.run(job, tx), future))
        result = future.result()
        _last_commit.set(future.commit)
        return result

    @staticmethod
    def last_commit() -> int:
        """The number (see ``commits``) of the last transaction this thread or task committed through ``write``;
        0 before its first. A writer tells the search index which commit it has just staged this way."""
        return _last_commit.get()

    def hold(self, job: Callable[[Tx], T]) -> T:
        """Run ``job`` on the writer thread between two transactions: no write commits while it runs (writes queue
        behind it), reads go on, and the database file and its write-ahead log stay as they are (only the writer
        changes them: a commit appends to the log, a checkpoint rewrites the file). ``job`` may read, or run
        ``CHECKPOINT``, through its ``Tx`` (each statement commits on its own). Backups copy the graph here."""
        if threading.current_thread() is self._writer:
            raise StorageError("a hold cannot run inside a write transaction")
        if self._closed or self.read_only:
            raise StorageError("the graph store is closed or opened read-only")
        future: Future[T] = Future()
        context = contextvars.copy_context()
        self._jobs.put((_HOLD, lambda: context.run(job, self._tx), future))
        return future.result()

    def _write_loop(self) -> None:
        tx = self._tx
        while True:
            try:  # while a checkpoint is due, an idle moment is the time to try it
                item = self._jobs.get(timeout=IDLE_CHECKPOINT_SECONDS if self._checkpoint_due else None)
            except queue.Empty:
                self._checkpoint_if_due()
                continue
            if item is _STOP:
                return
            if item[0] is _HOLD:
                _, held, future = item
                if future.set_running_or_notify_cancel():
                    try:
                        future.set_result(held())
                    except BaseException as exc:
                        future.set_exception(exc)
                continue
            job, future = item
            if not future.set_running_or_notify_cancel():
                continue
            began = False
            try:
                self._checkpoint_if_due()
                self._writer_conn.recycle_if_full()  # between transactions: nothing of one is lost
                self._writer_conn.execute("BEGIN TRANSACTION", {})
                began, tx.wrote, tx.copied, tx.committed, tx.committing = True, False, False, [], []
                tx.updated_rels = set()
                result = job(tx)
                for action in tx.committing:
                    action(tx)
                self._writer_conn.execute("COMMIT", {})
                self.commits += 1
                if isinstance(future, _Written):
                    future.commit = self.commits
                self._checkpoint_due = self._checkpoint_due or self._wal_bytes() >= CHECKPOINT_WAL_BYTES
            except BaseException as exc:
                if began:
                    self._rollback(checkpoint=tx.wrote, reopen=tx.copied)
                future.set_exception(_as_kumiho_error(exc))
            else:
                # listeners first: a caller that reads a commit counter after its write sees its own commit
                for listener in [*tx.committed, *self.on_commit]:
                    try:
                        listener()
                    except Exception:
                        log.exception("commit listener failed")
                future.set_result(result)

    def _rollback(self, checkpoint: bool, reopen: bool) -> None:
        # Kùzu 0.11.3 cannot roll back a COPY into a relationship table that holds rows: it drops the table's
        # committed rows from memory (a checkpoint then writes the loss to disk), a read of the table meanwhile
        # can hang, and when some of its rows are not checkpointed yet the next checkpoint crashes the process.
        # The database file and its write-ahead log are still right (the log holds committed transactions only),
        # so the engine rolls back with no read running and reopens the database without checkpointing it: the
        # log's replay rebuilds exactly the committed graph, with no version marks either
        # (tests/graph/test_copy_rollback.py).
        if reopen:
            try:
                self._rollback_and_reopen()
            except Exception:  # the writer thread must live on: later writes then fail with the cause
                log.exception("the graph database could not be reopened after a rolled-back bulk load")
            return
        with contextlib.suppress(RuntimeError):  # no active transaction: Kùzu rolled back a failed query itself
            self._writer_conn.execute("ROLLBACK", {})
        # Kùzu 0.11.3 keeps the version marks of rows a rolled-back transaction updated: the next update of such
        # a row fails ("Write-write conflict"), a rolled-back key can come back as a duplicate, and a few writes
        # later the process may crash inside Kùzu. A checkpoint clears them (tests/graph/test_rollback.py).
        if checkpoint:  # a job that only read and then refused leaves nothing to clear
            self._checkpoint_due = True
            self._checkpoint_if_due()

    def _checkpoint_if_due(self) -> None:
        """Checkpoint between transactions when one is due. Kùzu stops new transactions and waits at most 5 s for
        the running ones to end: a checkpoint that cannot run now is tried again before the next write or at the
        next idle moment, and from the second try on (at most once every 30 s) it holds new reads back and waits up
        to 10 s for those in flight. Without that, reads longer than 5 s (table scans at 100k memories under load)
        postponed checkpoint after checkpoint during a bulk fill, and the one that finally ran did not fit the
        buffer pool: Kùzu 0.11 then crashed the process (a 100k-memory fill died at 88k)."""
        if not self._checkpoint_due:
            return
        # reads are held back at most once every HELD_CHECKPOINT_BACKOFF_SECONDS: a read that outlasts the wait
        # (an export streaming for minutes) must not stall every write and read behind it; plain tries go on
        hold = self._checkpoints_postponed > 0 and time.monotonic() >= self._next_held_checkpoint
        try:
            if hold:
                self._checkpoint_with_reads_held()
            else:
                self._writer_conn.execute("CHECKPOINT", {})
        except RuntimeError as exc:
            self._checkpoints_postponed += 1
            if hold:
                self._next_held_checkpoint = time.monotonic() + HELD_CHECKPOINT_BACKOFF_SECONDS
            log.info("checkpoint postponed (tried again before the next write): %s", exc)
            return
        self._checkpoint_due, self._checkpoints_postponed = False, 0

    def _checkpoint_with_reads_held(self) -> None:
        """``CHECKPOINT`` once every reader connection is back in the pool (reads in flight finish, new ones
        wait for it); RuntimeError when reads hold on longer than ``READS_DRAIN_SECONDS`` (an export streaming
        for minutes must not stall every write: the checkpoint is tried again later)."""
        deadline = time.monotonic() + READS_DRAIN_SECONDS
        held: list[Connection] = []
        try:
            for _ in self.connections[1:]:
                try:
                    held.append(self._readers.get(timeout=max(0.0, deadline - time.monotonic())))
                except queue.Empty:
                    raise RuntimeError(f"reads still running after {READS_DRAIN_SECONDS:.0f} s") from None
            self._writer_conn.execute("CHECKPOINT", {})
        finally:
            for conn in held:
                self._readers.put(conn)

    def _rollback_and_reopen(self) -> None:
        """Roll back, close the database without the checkpoint Kùzu runs on close, and open it again. Reads in
        flight finish first and no read starts until it is done: every reader connection is out of the pool."""
        log.warning("reopening the graph database after a rolled-back bulk load")
        with contextlib.suppress(RuntimeError):  # no active transaction: Kùzu rolled back a failed query itself
            self._writer_conn.execute("ROLLBACK", {})
        readers = [self._readers.get() for _ in self.connections[1:]]
        try:
            self._writer_conn.execute("CALL force_checkpoint_on_close=false", {})
            for conn in self.connections:
                conn.close()
            self._db.close()
            self._db = kuzu.Database(str(self.path), buffer_pool_size=self._buffer_pool_mb * 1024 * 1024)
            for conn in self.connections:
                conn.reattach(self._db)
            self._writer_conn.execute("CALL auto_checkpoint=false", {})
            # the reopened database holds no version marks; a large log is still due its checkpoint
            self._checkpoint_due = self._wal_bytes() >= CHECKPOINT_WAL_BYTES
        finally:
            for conn in readers:
                self._readers.put(conn)

    def _wal_bytes(self) -> int:
        try:
            return self._wal.stat().st_size
        except FileNotFoundError:  # no write since the last checkpoint
            return 0

    # -- reads ----------------------------------------------------------------------------------------
    def read(self, job: Callable[[Tx], T]) -> T:
        if threading.current_thread() is self._writer:
            return job(self._tx)  # a write job reading its own uncommitted state
        conn = self._reader()
        started = time.monotonic()
        try:
            conn.recycle_if_full()
            return job(Tx(conn))
        finally:
            self._readers.put(conn)
            held = time.monotonic() - started
            if held > SLOW_READ_SECONDS:  # a checkpoint waits for every read: say which one kept it waiting
                log.warning("a graph read (%s) took %.1f s", getattr(job, "__qualname__", "?"), held)

    def _reader(self) -> Connection:
        """A free reader connection; StorageError once the store is closed (close() takes the free ones, so
        a read after it, or one waiting during it, would otherwise wait for ever)."""
        while True:
            if self._closed:
                raise StorageError("the graph store is closed")
            try:
                return self._readers.get(timeout=0.5)
            except queue.Empty:
                continue

    def close(self) -> None:
        if self._closed:
            return
        self._closed = True
        if not self.read_only:
            self._jobs.put(_STOP)
            self._writer.join()
        self._writer_conn.close()
        while not self._readers.empty():
            self._readers.get().close()
        self._db.close()


def _as_kumiho_error(exc: BaseException) -> BaseException:
    if isinstance(exc, KumihoError) or not isinstance(exc, Exception):
        return exc
    log.exception("graph write failed")
    return StorageError(f"the write failed and was rolled back: {exc}")
