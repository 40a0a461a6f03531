"""No network: the appliance, in a network namespace with only loopback, does its work, tries to connect
nowhere else, and writes nothing outside its data directory but what the probe's allow-list justifies."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from tests.appliance_process import ROOT, serve
from tests.mcp_api.clients import RevkaLikeClient
from tests.offline.probe import read_trace

needs_namespace = pytest.mark.skipif(
    os.geteuid() != 0 or not (shutil.which("unshare") and shutil.which("ip")),
    reason="a network namespace needs root, unshare and ip (CI runs as root)")
needs_strace = pytest.mark.skipif(shutil.which("strace") is None,
                                  reason="strace is not installed (make test-offline installs it)")


@needs_namespace
@needs_strace
def test_the_appliance_connects_nowhere_and_writes_only_in_its_data_dir(tmp_path: Path) -> None:
    result = subprocess.run(
        ["unshare", "-n", "sh", "-c", 'ip link set lo up && exec "$0" -m tests.offline.probe --data-dir "$1" '
         '--trace "$2"', sys.executable, str(tmp_path / "data"), str(tmp_path / "strace.log")],
        cwd=ROOT, capture_output=True, text=True, timeout=280)
    assert result.stdout.strip(), result.stderr[-3000:]
    report = json.loads(result.stdout)
    print(json.dumps(report, indent=1))
    assert report["network_interfaces"] == ["lo"]
    assert report["work"] == {"stored": True, "engaged": 1, "consolidated": True, "searched": 2}, report["work"]
    assert report["writes_in_data_dir"] > 10  # the trace saw the appliance at work
    assert report["connects_beyond_loopback"] == []
    assert report["written_outside_data_dir"]["unexplained"] == []
    assert result.returncode == 0


def test_the_trace_reader_finds_outbound_connects_and_writes_outside_the_data_dir(tmp_path: Path) -> None:
    """The probe is only as good as its reading of strace's output: the shapes strace -f -y prints."""
    data = tmp_path / "data"
    trace = tmp_path / "strace.log"
    trace.write_text("\n".join([
        '101 connect(7<socket:[1]>, {sa_family=AF_INET, sin_port=htons(443), sin_addr=inet_addr("13.107.5.93")},'
        ' 16) = -1 ENETUNREACH (Network is unreachable)',
        '101 connect(8<socket:[2]>, {sa_family=AF_INET, sin_port=htons(9190), sin_addr=inet_addr("127.0.0.1")},'
        ' 16) = 0',
        '101 connect(9<socket:[3]>, {sa_family=AF_INET6, sin6_port=htons(53), sin6_flowinfo=htonl(0), '
        'inet_pton(AF_INET6, "2001:db8::1", &sin6_addr), sin6_scope_id=0}, 28) = -1 ENETUNREACH',
        '101 connect(4<socket:[4]>, {sa_family=AF_UNIX, sun_path="/var/run/nscd/socket"}, 110) = -1 ENOENT',
        '103 connect(5<socket:[5]>, {sa_family=AF_INET, sin_port=htons(53), sin_addr=inet_addr("10.9.9.9")}, 16 '
        '<unfinished ...>',  # another thread's call splits this one in two
        '104 openat(AT_FDCWD</work>, "/etc/hosts", O_RDONLY|O_CLOEXEC) = 9</etc/hosts>',
        '103 <... connect resumed>)            = -1 ENETUNREACH (Network is unreachable)',
        f'102 openat(AT_FDCWD</work>, "{data}/graph/graph.kuzu", O_RDWR|O_CREAT|O_CLOEXEC, 0644) = 5<{data}/graph'
        '/graph.kuzu>',
        '102 openat(AT_FDCWD</work>, "/root/.cache/Microsoft/DeveloperTools/onnxruntime.db", O_RDWR|O_CREAT, '
        '0644) = 6</root/.cache/Microsoft/DeveloperTools/onnxruntime.db>',
        '102 openat(AT_FDCWD</work>, "/etc/hosts", O_RDONLY|O_CLOEXEC) = 7</etc/hosts>',
        '102 openat(AT_FDCWD</work>, "/tmp/never", O_WRONLY|O_CREAT, 0600) = -1 EACCES (Permission denied)',
        '102 rename("/work/appliance/__pycache__/x.cpython-311.pyc.140", '
        '"/work/appliance/__pycache__/x.cpython-311.pyc") = 0',
        '102 mkdirat(AT_FDCWD</root>, ".cache/elsewhere", 0777) = 0',
        f'102 renameat2(AT_FDCWD</x>, "{data}/a.tmp", AT_FDCWD</x>, "{data}/a.md", 0) = 0',
        '102 openat(AT_FDCWD</work>, "/dev/null", O_WRONLY|O_CLOEXEC) = 8</dev/null>',
    ]) + "\n")
    report = read_trace(trace, data)
    assert report["connects"] == 5
    assert report["connects_beyond_loopback"] == [
        "AF_INET 13.107.5.93:443 -> -1 ENETUNREACH (Network is unreachable)",
        "AF_INET6 [2001:db8::1]:53 -> -1 ENETUNREACH",
        "AF_INET 10.9.9.9:53 -> -1 ENETUNREACH (Network is unreachable)"]
    assert report["written_outside_data_dir"]["unexplained"] == [
        "/root/.cache/Microsoft/DeveloperTools/onnxruntime.db", "/root/.cache/elsewhere"]
    assert sorted(p for paths in report["written_outside_data_dir"]["explained"].values() for p in paths) == [
        "/dev/null", "/work/appliance/__pycache__/x.cpython-311.pyc"]


def test_the_embedding_runtime_leaves_no_telemetry_behind(tmp_path: Path) -> None:
    """ONNX Runtime, left to itself, writes a device id and an event store under ~/.cache/Microsoft on
    import and then tries to upload them; in the appliance it does neither (no strace or root needed)."""
    home = tmp_path / "home"
    home.mkdir()
    with serve(tmp_path / "data", HOME=str(home), KUMIHO_CE_SEARCH__EMBEDDER="minilm") as app:
        with RevkaLikeClient(app.base_url) as mcp:
            mcp.handshake()
            stored = json.loads(mcp.tool_text("kumiho_memory_store", {"title": "Telemetry check",
                                                                      "user_text": "Embedded by ONNX Runtime."}))
        assert stored["stored"] is True
        deadline = time.monotonic() + 120
        while httpx.get(app.base_url + "/api/_ready", timeout=30).json()["search"]["pending"] and \
                time.monotonic() < deadline:
            time.sleep(0.2)  # the search API reads the index as it is: wait for the memory's row
        found = httpx.get(app.base_url + "/api/v1/search", params={"q": "embedded by onnx runtime",
                                                                   "mode": "vector"}, timeout=60).json()
        assert found["count"] == 1  # the embedding model ran
        assert app.stop() == 0
    assert sorted(str(p.relative_to(home)) for p in home.rglob("*")) == []
