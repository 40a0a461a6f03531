"""Session identity on a real working memory: every branch of resolve_session and the consolidation flow."""

from __future__ import annotations

import hashlib
import threading
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

from appliance.errors import InvalidArgument
from appliance.memory.sessions import after_consolidation, resolve_session
from appliance.memory.working import WorkingMemory
from tests.conftest import FakeClock

ALICE = "personal:user-" + hashlib.sha256(b"alice").hexdigest()[:10]


@pytest.fixture
def wm(tmp_path: Path, clock: FakeClock) -> Iterator[WorkingMemory]:
    memory = WorkingMemory.open(tmp_path, clock=clock)
    try:
        yield memory
    finally:
        memory.close()


def resolve(wm: WorkingMemory, clock: FakeClock, **given: str | None) -> tuple[str, str]:
    args: dict[str, str | None] = {"session_id": None, "user_id": None, "context": None, "host_session_id": None}
    return resolve_session(wm, **{**args, **given}, clock=clock)  # type: ignore[arg-type]


def test_an_explicit_session_id_wins(wm: WorkingMemory, clock: FakeClock) -> None:
    assert resolve(wm, clock, session_id="mine", user_id="alice", host_session_id="h") == ("mine", "argument")


def test_a_blank_session_id_is_refused(wm: WorkingMemory, clock: FakeClock) -> None:
    with pytest.raises(InvalidArgument, match=r"^session_id: .*pass a non-empty id or omit it") as err:
        resolve(wm, clock, session_id="  ", user_id="alice")
    assert err.value.field == "session_id"


def test_without_a_user_the_host_session_is_used(wm: WorkingMemory, clock: FakeClock) -> None:
    assert resolve(wm, clock, host_session_id="host-1") == ("host-1", "host-env")
    wm.bump_generation("host-1")
    assert resolve(wm, clock, host_session_id="host-1") == ("host-1:c1", "host-env")


def test_no_identity_at_all_explains_what_to_pass(wm: WorkingMemory, clock: FakeClock) -> None:
    for host in (None, "", "  "):
        with pytest.raises(InvalidArgument, match="no session identity available: pass session_id explicitly "
                                                  r"\(and reuse the same value\) or user_id"):
            resolve(wm, clock, host_session_id=host)


def test_a_blank_user_id_is_refused(wm: WorkingMemory, clock: FakeClock) -> None:
    with pytest.raises(InvalidArgument, match=r"^user_id: ") as err:
        resolve(wm, clock, user_id=" ", host_session_id="host-1")
    assert err.value.field == "user_id"


def test_a_user_gets_a_generated_session_then_the_active_pointer(wm: WorkingMemory, clock: FakeClock) -> None:
    first = resolve(wm, clock, user_id="alice", host_session_id="host-1")
    assert first == (f"{ALICE}:20260301:001", "generated")
    assert wm.metadata("CognitiveMemory", first[0]) == {"user_id": "alice", "context": "personal"}
    assert resolve(wm, clock, user_id="alice", context="") == (first[0], "active-pointer")
    work = resolve(wm, clock, user_id="alice", context="work")
    assert work[0].startswith("work:user-") and work[0].endswith(":20260301:002")  # one sequence per user
    assert resolve(wm, clock, user_id="bob")[0].endswith(":20260301:001")


def test_the_date_is_utc_and_the_pointer_expires_after_a_day(wm: WorkingMemory, clock: FakeClock) -> None:
    clock.now = datetime(2026, 3, 1, 23, 30, tzinfo=UTC)
    first, _ = resolve(wm, clock, user_id="alice")
    clock.advance(hours=24)
    second, source = resolve(wm, clock, user_id="alice")
    assert (second, source) == (f"{ALICE}:20260302:001", "generated")
    assert first == f"{ALICE}:20260301:001"


def test_threads_resolving_the_same_user_agree(wm: WorkingMemory) -> None:
    fixed = lambda: datetime(2026, 3, 1, 12, tzinfo=UTC)  # noqa: E731 - FakeClock is not thread-safe
    barrier = threading.Barrier(8)
    results: list[tuple[str, str]] = []
    errors: list[BaseException] = []

    def worker() -> None:
        try:
            barrier.wait()
            results.append(resolve_session(wm, session_id=None, user_id="alice", context=None,
                                           host_session_id=None, clock=fixed))
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert errors == []
    assert len({sid for sid, _ in results}) == 1 and len(results) == 8
    assert wm.active_session("personal", "alice") == results[0][0]
    assert "generated" in {source for _, source in results}


def test_consolidating_the_host_session_moves_it_to_a_fresh_bucket(wm: WorkingMemory, clock: FakeClock) -> None:
    sid, _ = resolve(wm, clock, host_session_id="host-1")
    wm.append("P", sid, "user", "hello")
    after_consolidation(wm, sid, "host-1")
    assert resolve(wm, clock, host_session_id="host-1") == ("host-1:c1", "host-env")
    after_consolidation(wm, "host-1", "host-1")  # a stale id: no further bump
    assert wm.generation("host-1") == 1
    after_consolidation(wm, "host-1:c1", "host-1")
    assert resolve(wm, clock, host_session_id="host-1") == ("host-1:c2", "host-env")


def test_consolidating_a_user_session_releases_its_pointer(wm: WorkingMemory, clock: FakeClock) -> None:
    first, _ = resolve(wm, clock, user_id="alice")
    other, _ = resolve(wm, clock, user_id="bob")
    after_consolidation(wm, first, "host-1")
    assert wm.generation("host-1") == 0
    assert resolve(wm, clock, user_id="alice") == (f"{ALICE}:20260301:002", "generated")
    assert resolve(wm, clock, user_id="bob") == (other, "active-pointer")
    after_consolidation(wm, other, None)
    assert resolve(wm, clock, user_id="bob")[1] == "generated"
