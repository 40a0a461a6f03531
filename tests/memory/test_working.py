"""Working memory on a real SQLite file in tmp_path: ordering, bounds, persistence, kill -9."""

from __future__ import annotations

import signal
import subprocess
import sys
import textwrap
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from appliance.errors import Conflict, InvalidArgument
from appliance.memory.working import WorkingMemory
from tests.conftest import FakeClock

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def wm(tmp_path: Path, clock: FakeClock) -> Iterator[WorkingMemory]:
    memory = WorkingMemory.open(tmp_path / "working", max_messages=50, max_message_bytes=100, clock=clock)
    try:
        yield memory
    finally:
        memory.close()


def fill(wm: WorkingMemory, n: int, session: str = "s1") -> None:
    for i in range(n):
        wm.append("P", session, "user" if i % 2 == 0 else "assistant", f"m{i}")


def test_append_returns_ids_counts_and_first_bucket(wm: WorkingMemory) -> None:
    first = wm.append("P", "s1", "user", "hello", {"lang": "en"})
    second = wm.append("P", "s1", "assistant", "hi")
    assert (first.message_id, first.message_count, first.created_bucket) == ("s1:1", 1, True)
    assert (second.message_id, second.message_count, second.created_bucket) == ("s1:2", 2, False)
    [a, b] = wm.messages("P", "s1")
    assert (a.role, a.content, a.metadata, b.metadata) == ("user", "hello", {"lang": "en"}, {})
    assert a.timestamp.endswith("+00:00") and a.timestamp < b.timestamp


def test_messages_returns_the_last_limit_in_order_with_offset_from_the_end(wm: WorkingMemory) -> None:
    fill(wm, 12)
    assert [m.content for m in wm.messages("P", "s1")] == [f"m{i}" for i in range(2, 12)]
    assert [m.content for m in wm.messages("P", "s1", limit=3)] == ["m9", "m10", "m11"]
    assert [m.content for m in wm.messages("P", "s1", limit=3, offset=2)] == ["m7", "m8", "m9"]
    assert [m.content for m in wm.messages("P", "s1", limit=5, offset=10)] == ["m0", "m1"]
    assert wm.messages("P", "s1", offset=12) == []
    assert wm.count("P", "s1") == 12


def test_projects_and_sessions_are_separate(wm: WorkingMemory) -> None:
    wm.append("P", "s1", "user", "one")
    wm.append("Q", "s1", "user", "two")
    assert [m.content for m in wm.messages("Q", "s1")] == ["two"]
    assert wm.count("P", "other") == 0 and wm.messages("P", "other") == []


def test_everything_survives_a_restart(tmp_path: Path, clock: FakeClock) -> None:
    with WorkingMemory.open(tmp_path, clock=clock) as wm:
        fill(wm, 3)
        wm.set_metadata("P", "s1", {"user_id": "alice"})
        wm.claim_active_session("personal", "alice", "s1")
        wm.next_sequence("alice", "20260301")
        wm.bump_generation("host")
    with WorkingMemory.open(tmp_path, clock=clock) as wm:
        assert [m.content for m in wm.messages("P", "s1")] == ["m0", "m1", "m2"]
        assert wm.append("P", "s1", "user", "again").message_id == "s1:4"
        assert wm.metadata("P", "s1") == {"user_id": "alice"}
        assert wm.active_session("personal", "alice") == "s1"
        assert wm.next_sequence("alice", "20260301") == 2
        assert wm.generation("host") == 1


@pytest.mark.parametrize(("args", "field"), [
    (("", "s1", "user", "x"), "project"),
    (("P", "   ", "user", "x"), "session_id"),
    (("P" * 257, "s1", "user", "x"), "project"),
    (("P", "s" * 257, "user", "x"), "session_id"),
    (("P", "s1", "robot", "x"), "role"),
    (("P", "s1", "user", ""), "content"),
    (("P", "s1", "user", "é" * 51), "content"),  # 102 bytes of UTF-8 against a 100-byte limit
])
def test_invalid_appends_name_the_field(wm: WorkingMemory, args: tuple[str, ...], field: str) -> None:
    with pytest.raises(InvalidArgument, match=f"^{field}: ") as err:
        wm.append(*args)
    assert err.value.field == field
    assert wm.sessions() == []


def test_oversized_content_says_how_big_and_the_limit(wm: WorkingMemory) -> None:
    wm.append("P", "s1", "user", "x" * 100)
    with pytest.raises(InvalidArgument, match=r"101 bytes.*limit is 100"):
        wm.append("P", "s1", "user", "x" * 101)


def test_bad_metadata_and_paging_arguments_are_refused(wm: WorkingMemory) -> None:
    with pytest.raises(InvalidArgument, match=r"^metadata: "):
        wm.append("P", "s1", "user", "x", {"when": object()})
    with pytest.raises(InvalidArgument, match=r"^limit: "):
        wm.messages("P", "s1", limit=0)
    with pytest.raises(InvalidArgument, match=r"^offset: "):
        wm.messages("P", "s1", offset=-1)
    with pytest.raises(InvalidArgument, match=r"^values: "):
        wm.set_metadata("P", "s1", {"n": 1})  # type: ignore[dict-item]


def test_a_full_session_refuses_and_keeps_every_message(wm: WorkingMemory) -> None:
    fill(wm, 50)
    with pytest.raises(Conflict, match=r"holds 50 messages.*consolidate") as err:
        wm.append("P", "s1", "user", "one more")
    assert err.value.field == "session_id"
    assert wm.count("P", "s1") == 50
    assert wm.messages("P", "s1", limit=1, offset=49)[0].content == "m0"
    wm.append("P", "s2", "user", "other sessions still take messages")


def test_metadata_merges(wm: WorkingMemory) -> None:
    assert wm.metadata("P", "s1") == {}
    wm.set_metadata("P", "s1", {"user_id": "alice", "context": "work"})
    wm.set_metadata("P", "s1", {"context": "personal", "topic": "tea"})
    assert wm.metadata("P", "s1") == {"user_id": "alice", "context": "personal", "topic": "tea"}
    assert wm.sessions() == []  # metadata alone is not a session worth consolidating


def test_clear_removes_messages_and_metadata_but_never_reuses_ids(wm: WorkingMemory) -> None:
    fill(wm, 3)
    wm.set_metadata("P", "s1", {"user_id": "alice"})
    assert wm.clear("P", "s1") == 3
    assert (wm.count("P", "s1"), wm.messages("P", "s1"), wm.metadata("P", "s1")) == (0, [], {})
    assert wm.sessions() == []
    again = wm.append("P", "s1", "user", "fresh start")
    assert (again.message_id, again.message_count, again.created_bucket) == ("s1:4", 1, True)
    assert wm.clear("P", "never-used") == 0


def test_sessions_and_idle_sessions_follow_the_clock(wm: WorkingMemory, clock: FakeClock) -> None:
    fill(wm, 2, "old")
    clock.advance(minutes=20)
    fill(wm, 3, "recent")
    wm.append("Q", "elsewhere", "user", "x")
    listed = wm.sessions()
    assert [(s.project, s.session_id, s.message_count) for s in listed] == [
        ("Q", "elsewhere", 1), ("P", "recent", 3), ("P", "old", 2)]
    assert [s.session_id for s in wm.sessions("P")] == ["recent", "old"]
    old = listed[-1]
    assert old.first_at < old.last_at < listed[1].first_at
    assert wm.idle_sessions(1800) == []  # idle 20 min and 0 min
    clock.advance(minutes=15)
    assert [s.session_id for s in wm.idle_sessions(1800)] == ["old"]
    clock.advance(minutes=30)
    assert [s.session_id for s in wm.idle_sessions(1800)] == ["old", "recent", "elsewhere"]


def test_active_pointer_claim_expiry_and_clear(wm: WorkingMemory, clock: FakeClock) -> None:
    assert wm.active_session("personal", "alice") is None
    assert wm.claim_active_session("personal", "alice", "a1") == "a1"
    assert wm.claim_active_session("personal", "alice", "a2") == "a1"
    assert wm.active_session("work", "alice") is None
    clock.advance(hours=24)
    assert wm.active_session("personal", "alice") is None  # expired pointers are ignored …
    assert wm.claim_active_session("personal", "alice", "a2") == "a2"  # … and replaced
    wm.clear_active_session("personal", "alice", only_if="a1")
    assert wm.active_session("personal", "alice") == "a2"
    wm.clear_active_session("personal", "alice")
    assert wm.active_session("personal", "alice") is None
    wm.claim_active_session("personal", "bob", "shared")
    wm.claim_active_session("work", "bob", "shared")
    assert wm.clear_pointers_to("shared") == 2


def test_sequences_and_generations_count_up(wm: WorkingMemory) -> None:
    assert [wm.next_sequence("alice", "20260301") for _ in range(3)] == [1, 2, 3]
    assert wm.next_sequence("alice", "20260302") == 1
    assert wm.next_sequence("bob", "20260301") == 1
    assert wm.generation("host") == 0
    assert [wm.bump_generation("host") for _ in range(2)] == [1, 2]
    assert wm.generation("host") == 2


def test_concurrent_appends_lose_nothing(tmp_path: Path) -> None:
    wm = WorkingMemory.open(tmp_path, max_messages=1000)
    errors: list[BaseException] = []
    sequences: list[int] = []

    def writer(worker: int) -> None:
        try:
            for i in range(50):
                wm.append("P", "shared", "user", f"w{worker}-{i}")
                wm.append("P", f"own{worker}", "user", f"{i}")
            sequences.extend(wm.next_sequence("u", "d") for _ in range(10))
        except BaseException as exc:  # collected and asserted below
            errors.append(exc)

    threads = [threading.Thread(target=writer, args=(w,)) for w in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    try:
        assert errors == []
        assert wm.count("P", "shared") == 400
        assert sorted(m.message_id for m in wm.messages("P", "shared", limit=400)) == sorted(
            f"shared:{n}" for n in range(1, 401))
        assert all(wm.count("P", f"own{w}") == 50 for w in range(8))
        assert sorted(sequences) == list(range(1, 81))
    finally:
        wm.close()


def test_closed_memory_refuses_use(tmp_path: Path) -> None:
    wm = WorkingMemory.open(tmp_path)
    wm.close()
    wm.close()  # idempotent
    with pytest.raises(Exception, match="closed"):
        wm.append("P", "s1", "user", "x")


CHILD = textwrap.dedent("""
    import sys
    from pathlib import Path
    from appliance.memory.working import WorkingMemory
    wm = WorkingMemory.open(Path(sys.argv[1]), max_messages=1_000_000)
    i = 0
    while True:
        got = wm.append("P", "crash", "user", f"message {i} " + "x" * (i % 500))
        print(got.message_id, flush=True)  # printed only once append() has returned
        i += 1
""")


def test_every_acknowledged_append_survives_kill_9(tmp_path: Path) -> None:
    with subprocess.Popen([sys.executable, "-c", CHILD, str(tmp_path)], cwd=ROOT,
                          stdout=subprocess.PIPE, text=True) as child:
        assert child.stdout is not None
        acknowledged = [child.stdout.readline().strip() for _ in range(300)]
        child.send_signal(signal.SIGKILL)  # mid-loop: likely inside the next append's transaction
        acknowledged += child.stdout.read().split()
        child.wait(timeout=30)
    assert child.returncode == -signal.SIGKILL
    with WorkingMemory.open(tmp_path, max_messages=1_000_000) as wm:
        stored = wm.messages("P", "crash", limit=1_000_000)
        ids = [m.message_id for m in stored]
        assert set(acknowledged) <= set(ids)
        assert ids == [f"crash:{n}" for n in range(1, len(ids) + 1)]  # no holes, no torn tail
        assert wm.count("P", "crash") == len(ids)
        assert wm.append("P", "crash", "user", "after restart").message_id == f"crash:{len(ids) + 1}"
