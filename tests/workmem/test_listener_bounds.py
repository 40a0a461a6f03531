"""The listener and its command table on a real working memory (SQLite in a tmp dir), in this process: the
connection cap, and no input — random bytes or random commands on the sidecar's keys — that makes it raise,
hang or stop serving."""

from __future__ import annotations

import asyncio
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from appliance.memory.working import WorkingMemory
from appliance.workmem import redis_server
from appliance.workmem.commands import Commands, Connection
from appliance.workmem.resp import Error, ProtocolError, encode, read_command
from tests.appliance_process import free_port


@pytest.fixture
def working(tmp_path: Path) -> Iterator[WorkingMemory]:
    with WorkingMemory.open(tmp_path / "working") as memory:
        yield memory


def test_past_the_connection_cap_a_client_is_told_so(working: WorkingMemory) -> None:
    sock = redis_server.bind(free_port())
    assert sock is not None
    listener = redis_server.RedisListener(working, sock, None, max_connections=2)
    listener.start()
    clients = [redis.Redis(host="127.0.0.1", port=listener.port, protocol=2) for _ in range(3)]
    try:
        assert clients[0].ping() and clients[1].ping()
        with pytest.raises(redis.ConnectionError):  # redis-py reads the refusal as its handshake's answer
            clients[2].ping()
        with socket.create_connection(("127.0.0.1", listener.port), timeout=10) as raw:
            assert raw.recv(200) == b"-ERR max number of clients reached (2)\r\n"
        clients[0].close()
        fresh = redis.Redis(host="127.0.0.1", port=listener.port, protocol=2)
        assert fresh.ping(), "a slot frees when a client leaves"
        fresh.close()
    finally:
        for client in clients:
            client.close()
        listener.stop()


def test_the_token_is_compared_exactly(working: WorkingMemory) -> None:
    commands = Commands(working)
    conn = Connection(b"s3cret-token")
    assert isinstance(commands.run(conn, [b"GET", b"kumiho:memory:session_gen:x"]), Error)
    for wrong in (b"s3cret-toke", b"s3cret-token ", b"S3CRET-TOKEN", b""):
        reply = commands.run(conn, [b"AUTH", wrong])
        assert isinstance(reply, Error) and reply.text.startswith("WRONGPASS") and not conn.authenticated
    assert commands.run(conn, [b"AUTH", b"default", b"s3cret-token"]).text == "OK"  # type: ignore[union-attr]
    assert commands.run(conn, [b"GET", b"kumiho:memory:session_gen:x"]) is None


async def _parse(data: bytes) -> None:
    reader = asyncio.StreamReader(limit=redis_server.LINE_LIMIT)
    reader.feed_data(data)
    reader.feed_eof()
    while True:
        await read_command(reader)


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=256) | st.lists(st.sampled_from(
    [b"*", b"$", b"\r\n", b"1", b"3", b"-1", b"0", b"PING", b"GET", b"99999999", b"x"]), max_size=20).map(b"".join))
def test_random_bytes_are_a_protocol_error_or_the_end_of_input_never_a_crash(data: bytes) -> None:
    with pytest.raises((ProtocolError, asyncio.IncompleteReadError)):
        asyncio.run(_parse(data))


NAMES = [b"GET", b"SET", b"DEL", b"INCR", b"INCRBY", b"EXPIRE", b"TTL", b"RPUSH", b"LRANGE", b"LLEN", b"HSET",
         b"HGETALL", b"SCAN", b"PING", b"ECHO", b"HELLO", b"AUTH", b"SELECT", b"CLIENT", b"QUIT", b"EVAL", b"ping"]
KEYS = [b"kumiho:memory:P:sessions:s:1:messages", b"kumiho:memory:t:P:sessions:s:metadata",
        b"kumiho:memory:active_session:c:u", b"kumiho:memory:session_seq:u:20260101",
        b"kumiho:memory:session_gen:b", b"kumiho:memory:", b"kumiho:memory:P:sessions::messages", b"\xff\xfe",
        b"kumiho:memory:P:sessions:*", b"MATCH", b"COUNT", b"EX", b"NX", b"3", b"-1", b"0", b"SETINFO"]
ARGUMENT = st.sampled_from(KEYS) | st.binary(max_size=40) | st.sampled_from(
    [b'{"role": "user", "content": "hi"}', b'{"role": "user", "content": ""}', b"[]", b"null", b'{"content": 1}'])


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.tuples(st.sampled_from(NAMES), st.lists(ARGUMENT, max_size=6)), min_size=1, max_size=8),
       st.booleans())
def test_random_commands_always_get_a_reply(working: WorkingMemory, script: list[tuple[bytes, list[bytes]]],
                                            with_token: bool) -> None:
    commands = Commands(working)
    conn = Connection(b"tok" if with_token else None)
    for name, args in script:
        reply = commands.run(conn, [name, *args])
        for protocol in (2, 3):
            assert encode(reply, protocol).endswith(b"\r\n")


def test_a_taken_port_is_a_warning_not_a_failure(caplog: pytest.LogCaptureFixture) -> None:
    with socket.create_server(("127.0.0.1", 0)) as taken:
        assert redis_server.bind(taken.getsockname()[1]) is None
    assert "redis_port" in caplog.text and "KUMIHO_CE_KUMIHO__REDIS_PORT" in caplog.text


def test_a_half_sent_command_does_not_hold_its_connection(working: WorkingMemory) -> None:
    sock = redis_server.bind(free_port())
    assert sock is not None
    listener = redis_server.RedisListener(working, sock, None, command_seconds=0.2)
    listener.start()
    try:
        with socket.create_connection(("127.0.0.1", listener.port), timeout=10) as raw:
            raw.sendall(b"*1\r\n$4\r\nPI")  # and nothing more
            answer = b""
            while chunk := raw.recv(200):
                answer += chunk
        assert answer == b"-ERR Protocol error: a command must arrive whole within 0.2 s\r\n"
        with socket.create_connection(("127.0.0.1", listener.port), timeout=10) as idle:
            time.sleep(0.4)  # idle longer than a command may take
            idle.sendall(b"*1\r\n$4\r\nPING\r\n")
            assert idle.recv(100) == b"+PONG\r\n"  # an idle connection between commands is not timed out
    finally:
        listener.stop()


def test_a_scan_glob_past_its_bound_is_refused_naming_it(working: WorkingMemory) -> None:
    working.append("rvp", "s-1", "user", "hello")
    sock = redis_server.bind(free_port())
    assert sock is not None
    listener = redis_server.RedisListener(working, sock, None)
    listener.start()
    client = redis.Redis(host="127.0.0.1", port=listener.port, protocol=2, decode_responses=True)
    head = "kumiho:memory:rvp:sessions:"
    try:
        assert client.scan(0, match=head + "*:messages", count=100) == (0, [head + "s-1:messages"])
        assert client.scan(0, match=head + "[^x]*:messages") == (0, [head + "s-1:messages"])  # Redis's negation
        for glob, bound in (("*a" * 400_000, "at most 256 characters"), ("*a" * 9, "at most 8 wildcards"),
                            ("[a" * 9 + "]", "at most 8 wildcards")):
            with pytest.raises(redis.ResponseError) as refused:
                client.scan(0, match=head + glob, count=100)
            said = str(refused.value)
            assert said.startswith("MATCH (the glob after ':sessions:'): ") and bound in said, said
        assert client.ping(), "the listener still serves"
        assert client.scan(0, match=head + "*a" * 8) == (0, [])  # at the bound: served
    finally:
        client.close()
        listener.stop()


def _until_closed(raw: socket.socket) -> bytes:
    answer = b""
    while chunk := raw.recv(500):
        answer += chunk
    return answer


def test_a_connection_that_does_not_authenticate_in_time_is_closed(working: WorkingMemory) -> None:
    sock = redis_server.bind(free_port())
    assert sock is not None
    listener = redis_server.RedisListener(working, sock, "the-token", auth_seconds=0.3)
    listener.start()
    closing = b"-ERR authentication required within 0.3 s of connecting: AUTH with the appliance's token; closing\r\n"
    try:
        with socket.create_connection(("127.0.0.1", listener.port), timeout=10) as idle:
            assert _until_closed(idle) == closing, "an idle connection that never authenticates"
        with socket.create_connection(("127.0.0.1", listener.port), timeout=10) as refused:
            refused.sendall(b"*2\r\n$4\r\nAUTH\r\n$5\r\nwrong\r\n*1\r\n$4\r\nPING\r\n")  # busy, never authenticated
            answer = _until_closed(refused)
            assert answer.startswith(b"-WRONGPASS") and b"-NOAUTH" in answer and answer.endswith(closing)
        client = redis.Redis(host="127.0.0.1", port=listener.port, password="the-token", protocol=2)
        try:
            first = client.client_id()
            time.sleep(0.6)  # authenticated: no deadline any more
            assert client.client_id() == first, "the same connection still serves"
        finally:
            client.close()
    finally:
        listener.stop()
