"""A graceful stop (SIGTERM: `systemctl stop`, a restart, a shutdown) while writes are under way: a request whose
body is still arriving when the stop begins is finished and committed; batches written by clients as the stop
comes are each committed whole (and were answered so) or refused; after a restart nothing is half-written."""

from __future__ import annotations

import json
import signal
import socket
import sys
import threading
from pathlib import Path

import httpx

from tests.appliance_process import cli_env, free_port, serve
from tests.systemd.service import NotifySocket, start

API = "/api/v1/memories"
BATCH = 50


def batch(namespace: str) -> dict[str, object]:
    return {"entries": [{"key": f"entry-{i}", "namespace": namespace,
                         "content": f"The {namespace} batch holds entry number {i} of the stop test."}
                        for i in range(BATCH)]}


class Writer(threading.Thread):
    """Stores batches, each in a namespace of its own, until one is refused (the appliance is stopping or gone);
    what each answer was."""

    def __init__(self, base_url: str, name: str, gone: threading.Event) -> None:
        super().__init__(daemon=True)
        self.base_url, self.prefix, self.gone = base_url, name, gone
        self.outcomes: dict[str, str] = {}
        self.committed = threading.Semaphore(0)

    def run(self) -> None:
        n = 0
        with httpx.Client(base_url=self.base_url, timeout=60) as client:
            while not self.gone.is_set():
                namespace = f"{self.prefix}-{n}"
                n += 1
                try:
                    answer = client.post(f"{API}/batch", json=batch(namespace))
                    outcome = "committed" if answer.status_code == 201 else f"answered {answer.status_code}"
                except httpx.TransportError as exc:
                    outcome = f"refused ({type(exc).__name__})"
                self.outcomes[namespace] = outcome
                if outcome != "committed":
                    return
                self.committed.release()


def test_writes_under_way_at_sigterm_are_finished_or_refused_never_half_written(tmp_path: Path) -> None:
    data_dir, port = tmp_path / "data", free_port()
    base_url = f"http://127.0.0.1:{port}"
    in_flight = json.dumps({"key": "in-flight", "namespace": "stop-test",
                            "content": "Stored by a request whose body was still arriving when the stop began."}
                           ).encode()
    with NotifySocket(path=tmp_path / "notify.sock") as manager:
        process = start([sys.executable, "-m", "appliance", "serve", "--port", str(port)],
                        cli_env(data_dir, NOTIFY_SOCKET=manager.address), tmp_path / "serve.log")
        gone = threading.Event()
        writers = [Writer(base_url, f"writer{i}", gone) for i in range(2)]
        try:
            manager.wait_for("READY=1", 120, alive=lambda: process.poll() is None)
            for writer in writers:
                writer.start()
            for writer in writers:  # writes are flowing
                assert writer.committed.acquire(timeout=120) and writer.committed.acquire(timeout=120)
            slow = socket.create_connection(("127.0.0.1", port), timeout=30)
            slow.sendall(f"POST {API} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
                         f"Content-Length: {len(in_flight)}\r\n\r\n".encode() + in_flight[:20])
            process.send_signal(signal.SIGTERM)
            manager.wait_for("STOPPING=1", 60)
            slow.sendall(in_flight[20:])  # the rest of the body, after the stop began
            answer = b""
            while chunk := slow.recv(65536):
                answer += chunk
            slow.close()
            assert answer.startswith(b"HTTP/1.1 201 "), answer[:300]
            assert process.wait(timeout=90) == 0
        finally:
            gone.set()
            if process.poll() is None:
                process.kill()
                process.wait()
        for writer in writers:
            writer.join(60)
    outcomes = {ns: outcome for writer in writers for ns, outcome in writer.outcomes.items()}
    assert "committed" in outcomes.values() and [o for o in outcomes.values() if o != "committed"], outcomes

    with serve(data_dir) as again, httpx.Client(base_url=again.base_url, timeout=60) as client:
        stored = client.get(f"{API}/in-flight", params={"namespace": "stop-test"})
        assert stored.status_code == 200 and stored.json()["content"] == json.loads(in_flight)["content"]
        for namespace, outcome in outcomes.items():
            count = client.get(f"{API}/count", params={"namespace": namespace}).json()["count"]
            if outcome == "committed":
                assert count == BATCH, (namespace, count)
            else:  # refused, or cut off before its answer: all of it or none, never part
                assert count in (0, BATCH), (namespace, outcome, count)
        last = client.get(f"{API}/entry-{BATCH - 1}", params={"namespace": "writer0-0"}).json()
        assert last["content"] == batch("writer0-0")["entries"][-1]["content"]  # type: ignore[index]
