"""The Redis-protocol listener of a real appliance, driven by the real ``redis`` client library (RESP2 and RESP3)
and by raw sockets: the commands and key layout of Kumiho's buffer, the working-memory TTL semantics, clear
errors for everything else, bounded input, and an appliance that starts when the port is taken."""

from __future__ import annotations

import json
import socket
from collections.abc import Iterator

import pytest
import redis

from tests.appliance_process import free_port, serve
from tests.workmem.conftest import PROJECT, Appliance

MESSAGE = json.dumps({"role": "user", "content": "hello from redis", "timestamp": "2026-01-01T00:00:00+00:00",
                      "metadata": {"channel": "unknown"}})


@pytest.fixture(params=[2, 3], ids=["resp2", "resp3"])
def client(appliance: Appliance, request: pytest.FixtureRequest) -> Iterator[redis.Redis]:
    connection = redis.Redis(host="127.0.0.1", port=appliance.redis_port, protocol=request.param,
                             decode_responses=True)
    yield connection
    connection.close()


def keys_of(session: str, tenant: str = "") -> tuple[str, str]:
    head = f"kumiho:memory:{tenant + ':' if tenant else ''}{PROJECT}:sessions:{session}"
    return head + ":messages", head + ":metadata"


def test_the_buffer_commands_on_the_sidecars_keys(client: redis.Redis) -> None:
    proto = client.connection_pool.connection_kwargs["protocol"]
    messages, metadata = keys_of(f"personal:user-r{proto}:20260101:001")
    assert client.rpush(messages, MESSAGE) == 1 and client.rpush(messages, MESSAGE.replace("hello", "bye")) == 2
    stored = [json.loads(m) for m in client.lrange(messages, -10, -1)]
    assert [m["content"] for m in stored] == ["hello from redis", "bye from redis"]
    assert all(m["role"] == "user" and m["metadata"] == {"channel": "unknown"} and m["timestamp"] for m in stored)
    assert [json.loads(m)["content"] for m in client.lrange(messages, -1, -1)] == ["bye from redis"]
    assert client.lrange(messages, 5, 10) == []
    assert client.llen(messages) == 2
    assert client.hset(metadata, mapping={"user_id": "u1", "context": "personal"}) == 2
    assert client.hset(metadata, mapping={"user_id": "u2"}) == 0
    assert client.hgetall(metadata) == {"user_id": "u2", "context": "personal"}
    # buffers do not expire: EXPIRE is accepted (1 for a key that exists) and TTL says "no expiry"
    assert client.expire(messages, 3600) is True and client.ttl(messages) == -1
    assert client.expire(keys_of("nobody")[0], 3600) is False and client.ttl(keys_of("nobody")[0]) == -2
    assert client.delete(messages, metadata) == 2
    assert client.llen(messages) == 0 and client.hgetall(metadata) == {}


def test_pointers_sequences_and_generations(client: redis.Redis) -> None:
    proto = client.connection_pool.connection_kwargs["protocol"]
    pointer = f"kumiho:memory:active_session:personal:user-p{proto}"
    assert client.get(pointer) is None
    assert client.set(pointer, "first", ex=86400, nx=True) is True
    assert client.set(pointer, "second", ex=86400, nx=True) is None
    assert client.get(pointer) == "first" and 86000 < client.ttl(pointer) <= 86400  # pointers live 24 hours
    assert client.set(pointer, "second", ex=86400) is True and client.get(pointer) == "second"
    assert client.delete(pointer) == 1 and client.get(pointer) is None and client.ttl(pointer) == -2
    sequence = f"kumiho:memory:session_seq:user-p{proto}:20260101"
    assert client.get(sequence) is None
    assert [client.incr(sequence) for _ in range(3)] == [1, 2, 3] and client.get(sequence) == "3"
    assert client.expire(sequence, 172800) is True and client.ttl(sequence) == -1
    generation = f"kumiho:memory:session_gen:host-p{proto}"
    assert client.get(generation) is None and client.incr(generation) == 1 and client.get(generation) == "1"


def test_the_tenant_segment_names_the_same_session(client: redis.Redis) -> None:
    proto = client.connection_pool.connection_kwargs["protocol"]
    session = f"tenant-s{proto}"
    client.rpush(keys_of(session, tenant="acme")[0], MESSAGE)
    assert client.llen(keys_of(session)[0]) == 1
    listed = client.scan(0, match=f"kumiho:memory:acme:{PROJECT}:sessions:*:messages", count=100)
    assert listed[0] == 0 and keys_of(session, tenant="acme")[0] in listed[1]
    assert client.scan(0, match=f"kumiho:memory:{PROJECT}:sessions:tenant-s{proto}*", count=100) == (
        0, [keys_of(session)[0]])
    client.delete(keys_of(session)[0])


def test_anything_else_is_a_clear_error_naming_what_is_served(client: redis.Redis) -> None:
    with pytest.raises(redis.ResponseError, match=r"unknown command 'FLUSHALL'.*GET SET DEL INCR"):
        client.flushall()
    with pytest.raises(redis.ResponseError, match=r"key 'foo' is not a Kumiho working-memory key; served: "
                                                  r"kumiho:memory\[:<tenant>\]:<project>:sessions"):
        client.get("foo")
    with pytest.raises(redis.ResponseError, match="WRONGTYPE"):
        client.lrange(keys_of("x")[1], 0, -1)
    with pytest.raises(redis.ResponseError, match="SCAN needs MATCH"):
        client.scan(0)
    with pytest.raises(redis.ResponseError, match="the project named literally"):
        client.scan(0, match="kumiho:memory:*:sessions:*:messages")
    with pytest.raises(redis.ResponseError, match="value: give one JSON message"):
        client.rpush(keys_of("x")[0], "not json")
    with pytest.raises(redis.ResponseError, match="role: give one of"):
        client.rpush(keys_of("x")[0], json.dumps({"role": "narrator", "content": "x"}))
    with pytest.raises(redis.ResponseError, match="session_id: give a non-empty string"):
        client.set("kumiho:memory:active_session:personal:u", " ")
    with pytest.raises(redis.ResponseError, match="database 0 only"):
        client.select(1)
    assert client.ping() is True  # the connection serves on after every refusal


def test_a_db_in_the_url_and_client_housekeeping(appliance: Appliance) -> None:
    client = redis.Redis.from_url(appliance.redis_url + "/0", client_name="sidecar")
    try:
        assert client.ping() is True and client.client_getname() == "sidecar" and client.select(0) is True
    finally:
        client.close()


def raw(port: int, payload: bytes) -> bytes:
    """Everything the listener answers to ``payload`` until it closes the connection."""
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
        sock.sendall(payload)
        received = b""
        while chunk := sock.recv(65536):
            received += chunk
        return received


@pytest.mark.parametrize(("payload", "answer"), [
    (b"PING\r\n", b"-ERR Protocol error: expected '*'"),
    (b"*1\r\n$99999999\r\n", b"-ERR Protocol error: an argument is 0 to 1048576 bytes"),
    (b"*5000\r\n", b"-ERR Protocol error: a command has 1 to 1024 arguments"),
    (b"*x\r\n", b"-ERR Protocol error: invalid multibulk length"),
    (b"*1\r\n$4\r\nPINGxx", b"-ERR Protocol error: a bulk string must end with CRLF"),
    (b"*1\r\n" + b"9" * 70000, b"-ERR Protocol error: header line too long"),
    (b"*1\r\n$4\r\nQUIT\r\n", b"+OK\r\n"),
])
def test_bad_input_is_answered_and_the_connection_closed(appliance: Appliance, payload: bytes,
                                                          answer: bytes) -> None:
    assert raw(appliance.redis_port, payload).startswith(answer)
    client = redis.Redis(host="127.0.0.1", port=appliance.redis_port)
    try:
        assert client.ping() is True
    finally:
        client.close()


def test_an_oversized_command_is_refused_before_it_is_read_whole(appliance: Appliance) -> None:
    full = 1024 * 1024
    head = b"*3\r\n$5\r\nRPUSH\r\n$%d\r\n" % full + b"x" * full + b"\r\n$%d\r\n" % full  # its data never sent
    assert raw(appliance.redis_port, head).startswith(b"-ERR Protocol error: a command is at most 2097152 bytes")


def test_the_appliance_starts_when_the_redis_port_is_taken_and_says_which_setting(tmp_path) -> None:  # type: ignore[no-untyped-def]
    with socket.create_server(("127.0.0.1", 0)) as taken:
        port = taken.getsockname()[1]
        with serve(tmp_path / "data", KUMIHO_CE_KUMIHO__REDIS_PORT=str(port)) as running:
            log = (tmp_path / "data.log").read_text()
            assert "the working-memory Redis listener is off" in log and "redis_port" in log
            assert running.process.poll() is None
    assert free_port()  # the appliance is gone and nothing leaked


def test_metadata_is_bounded_per_message_and_per_session(client: redis.Redis) -> None:
    proto = client.connection_pool.connection_kwargs["protocol"]
    messages, metadata = keys_of(f"personal:user-bounds{proto}:20260101:001")
    try:
        heavy = json.dumps({"role": "user", "content": "hi", "metadata": {"blob": "x" * 20_000}})
        with pytest.raises(redis.ResponseError, match=r"^metadata: 200\d\d bytes as JSON; a message's metadata is "
                           r"at most 16384"):
            client.rpush(messages, heavy)
        assert client.llen(messages) == 0, "nothing buffered"
        assert client.rpush(messages, MESSAGE) == 1
        assert client.hset(metadata, mapping={f"f{i}": "v" for i in range(64)}) == 64
        with pytest.raises(redis.ResponseError, match=r"^metadata: the session's metadata would hold 65 fields; a "
                           r"session keeps at most 64"):
            client.hset(metadata, "one-more", "v")
        assert client.hset(metadata, "f0", "changed") == 0, "updating a field that exists still fits"
        assert client.delete(metadata) == 1
        assert client.hset(metadata, mapping={"a": "x" * 40_000}) == 1
        with pytest.raises(redis.ResponseError, match=r"^metadata: the session's metadata would hold 800\d\d bytes "
                           r"as JSON; a session keeps at most 65536"):
            client.hset(metadata, mapping={"b": "x" * 40_000})
        with pytest.raises(redis.ResponseError, match=r"^metadata: the write alone holds 100 fields"):
            client.hset(metadata, mapping={f"g{i}": "v" for i in range(100)})
        assert list(client.hgetall(metadata)) == ["a"], "a refused write changes nothing"
    finally:
        client.delete(messages, metadata)
