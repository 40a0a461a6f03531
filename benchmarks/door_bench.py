"""What hostile connections can hold of a running appliance: prints one JSON object.

    python benchmarks/door_bench.py [--connections 200] [--prefaces 100] [--hold 60] [--root CHECKOUT]

Starts `kumiho-ce serve` (default settings, loopback, a fresh data directory) and measures:

* trickle: connections that send one header line a second and never finish (slowloris): how long the server
  keeps them (seconds, min/median/max) and how many are still open after ``--hold`` seconds;
* huge_header: one header of up to 64 MiB: how many bytes the server took before closing, and its answer;
* prefaces: connections that send the HTTP/2 preface and nothing more (handed to the gRPC server, which closes
  a handshake the client never finishes): how long each is kept, and the server's CPU seconds; then
  connections that send only ``PR`` and wait: how long they are kept and the CPU the server spends meanwhile;
* the server's RSS before and after, and whether it still answers.

``--root`` runs the appliance from another checkout (e.g. an older one, to compare).
"""

from __future__ import annotations

import argparse
import json
import os
import selectors
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[1]
H2_PREFACE = b"PRI * HTTP/2.0\r\n\r\nSM\r\n\r\n"


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def start(root: Path, data_dir: Path, port: int) -> subprocess.Popen[bytes]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("KUMIHO_CE_")}
    env.update({"KUMIHO_CE_DATA_DIR": str(data_dir), "KUMIHO_CE_SEARCH__EMBEDDER": "hashing",
                "KUMIHO_CE_INFERENCE__CHAT_MODEL": "none", "PYTHONPATH": str(root),
                "XDG_CONFIG_HOME": str(data_dir.parent / "no-config")})
    log = open(data_dir.parent / "serve.log", "ab")  # noqa: SIM115 -- the child keeps it
    process = subprocess.Popen([sys.executable, "-m", "appliance", "serve", "--port", str(port)], cwd=root,
                               env=env, stdout=log, stderr=log)
    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        try:
            if httpx.get(f"http://127.0.0.1:{port}/api/_live", timeout=1).status_code == 200:
                return process
        except httpx.TransportError:
            time.sleep(0.1)
    process.kill()
    raise SystemExit("the appliance did not come up; see serve.log")


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return round(int(line.split()[1]) / 1024, 1)
    return 0.0


def survival(conns: list[socket.socket], hold: float, trickle: bytes | None) -> list[float | None]:
    """Seconds until the server closed each connection (None: still open after ``hold``)."""
    began = time.monotonic()
    closed: dict[socket.socket, float] = {}
    selector = selectors.DefaultSelector()
    for conn in conns:
        conn.setblocking(False)
        selector.register(conn, selectors.EVENT_READ)
    next_trickle = began + 1
    while len(closed) < len(conns) and time.monotonic() - began < hold:
        if trickle and time.monotonic() >= next_trickle:
            next_trickle += 1
            for conn in set(conns) - closed.keys():
                try:
                    conn.send(trickle)
                except OSError:
                    closed[conn] = time.monotonic() - began
                    selector.unregister(conn)
        for key, _ in selector.select(timeout=0.2):
            conn = key.fileobj  # type: ignore[assignment]
            try:
                data = conn.recv(65536)
            except OSError:
                data = b""
            if not data:
                closed[conn] = time.monotonic() - began
                selector.unregister(conn)
    selector.close()
    return [closed.get(conn) for conn in conns]


def summary(times: list[float | None]) -> dict[str, object]:
    done = [t for t in times if t is not None]
    return {"connections": len(times), "still_open": len(times) - len(done),
            "closed_after_s": {"min": round(min(done), 2), "median": round(statistics.median(done), 2),
                               "max": round(max(done), 2)} if done else None}


def connect(port: int, first: bytes) -> socket.socket:
    conn = socket.create_connection(("127.0.0.1", port), timeout=10)
    conn.sendall(first)
    return conn


def trickle(port: int, count: int, hold: float) -> dict[str, object]:
    conns = [connect(port, b"GET /api/_live HTTP/1.1\r\nHost: 127.0.0.1\r\n") for _ in range(count)]
    try:
        return summary(survival(conns, hold, b"X-Trickle: 1\r\n"))
    finally:
        for conn in conns:
            conn.close()


def huge_header(port: int) -> dict[str, object]:
    conn = connect(port, b"GET /api/_live HTTP/1.1\r\nHost: 127.0.0.1\r\nX-Big: ")
    conn.settimeout(10)
    sent = 0
    try:
        while sent < 64 * 1_048_576:
            conn.sendall(b"a" * 65536)
            sent += 65536
        conn.sendall(b"\r\n\r\n")
    except OSError:
        pass
    try:
        answer = conn.recv(65536)
    except OSError:
        answer = b""
    conn.close()
    return {"offered_mib": 64, "sent_before_close_mib": round(sent / 1_048_576, 2),
            "answer": answer.split(b"\r\n", 1)[0].decode("latin-1") or None}


def prefaces(port: int, pid: int, count: int, hold: float) -> dict[str, object]:
    cpu = cpu_seconds(pid)
    began = time.monotonic()
    conns = [connect(port, H2_PREFACE) for _ in range(count)]
    full = survival(conns, hold, None)
    for conn in conns:
        conn.close()
    full_cpu = cpu_seconds(pid) - cpu
    full_wall = time.monotonic() - began
    cpu = cpu_seconds(pid)
    began = time.monotonic()
    conns = [connect(port, b"PR") for _ in range(count)]
    partial = survival(conns, hold, None)
    for conn in conns:
        conn.close()
    partial_wall = time.monotonic() - began
    return {"full_preface": {**summary(full), "server_cpu_s": round(full_cpu, 2), "wall_s": round(full_wall, 2)},
            "partial_preface": {**summary(partial), "server_cpu_s": round(cpu_seconds(pid) - cpu, 2),
                                "wall_s": round(partial_wall, 2)}}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--connections", type=int, default=200, help="trickling connections")
    parser.add_argument("--prefaces", type=int, default=100, help="HTTP/2 preface connections")
    parser.add_argument("--hold", type=float, default=60.0, help="longest wait for the server to close one")
    parser.add_argument("--root", type=Path, default=ROOT, help="checkout to run the appliance from")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        port = free_port()
        process = start(args.root.resolve(), Path(tmp) / "data", port)
        try:
            rss_before = rss_mb(process.pid)
            result = {"benchmark": "door", "root": str(args.root),
                      "trickle": trickle(port, args.connections, args.hold),
                      "huge_header": huge_header(port),
                      "prefaces": prefaces(port, process.pid, args.prefaces, args.hold),
                      "rss_mb": {"before": rss_before, "after": rss_mb(process.pid)},
                      "still_answers": httpx.get(f"http://127.0.0.1:{port}/api/_live", timeout=10).status_code == 200}
        finally:
            process.send_signal(signal.SIGTERM)
            try:
                process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                process.kill()
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
