"""The built image run with ``buildah run`` for tests/container: a working container of the image whose CMD runs in
the background with a host directory as its /data volume. Chroot isolation, as the build uses: the image's CMD,
USER, environment and volume, with no OCI runtime, cgroup manager or container network to set up on this machine.

``make test-container`` builds the image (KUMIHO_CE_TEST_IMAGE names it) and runs tests/container inside a network
namespace that holds only loopback: the appliance binds every address of the container, so it is reachable from
here alone, and anything it tried to fetch at run time would fail.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest

from appliance.config import DEFAULT_PORT

IMAGE = os.environ.get("KUMIHO_CE_TEST_IMAGE", "")
BUILDAH = ["buildah", "--storage-driver", "vfs"]
VENV = "/opt/kumiho-ce/.venv"
UID = 10001  # the image's USER
CONTAINER_LOG = "/tmp/container.log"  # the CMD's output, in the container
BASE_URL = f"http://127.0.0.1:{DEFAULT_PORT}"  # the image's default port, in this test's own network namespace


def buildah(*args: str, timeout: float = 300, check: bool = True) -> subprocess.CompletedProcess[str]:
    done = subprocess.run([*BUILDAH, *args], capture_output=True, text=True, timeout=timeout, check=False)
    if check:
        assert done.returncode == 0, f"buildah {' '.join(args)}: {done.stderr[-3000:]}"
    return done


def image_config() -> dict[str, Any]:
    """``buildah inspect`` of the image under test; fails when none was named or outside a loopback-only network
    namespace (`make test-container` builds the image and runs these tests as they need)."""
    if not IMAGE:
        pytest.fail("no image to test: `make test-container` builds one and runs tests/container with "
                    "KUMIHO_CE_TEST_IMAGE set")
    interfaces = sorted(name for _, name in socket.if_nameindex())  # this namespace's (/sys may show the host's)
    assert interfaces == ["lo"], (f"run this in a network namespace with only loopback (make test-container), not "
                                  f"beside {interfaces}: the container listens on every address")
    return json.loads(buildah("inspect", "--type", "image", IMAGE).stdout)  # type: ignore[no-any-return]


def _parent(pid: int) -> int:
    stat = Path(f"/proc/{pid}/stat").read_text()
    return int(stat.rsplit(")", 1)[1].split()[1])


def descendants_running(ancestor: int, script: str) -> list[int]:
    """Host pids of the processes under ``ancestor`` that run the image's ``script`` (a path in the image)."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            argv = (entry / "cmdline").read_bytes().split(b"\0")
            if script.encode() not in argv[:2]:
                continue
            pid = int(entry.name)
            while pid > 1 and pid != ancestor:
                pid = _parent(pid)
        except (OSError, ValueError, IndexError):  # gone meanwhile
            continue
        if pid == ancestor:
            found.append(int(entry.name))
    return sorted(found)


def owner_uid(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(next(line for line in status.splitlines() if line.startswith("Uid:")).split()[1])


def live() -> bool:
    try:
        return httpx.get(BASE_URL + "/api/_live", timeout=2).status_code == 200
    except httpx.TransportError:
        return False


@dataclass
class Container:
    name: str
    data: Path
    process: subprocess.Popen[bytes]
    log: Path  # buildah's own output
    root: Path  # the container's file system, mounted

    def running(self, script: str) -> list[int]:
        return descendants_running(self.process.pid, f"{VENV}/bin/{script}")

    def appliance(self) -> int:
        (pid,) = self.running("kumiho-ce")
        return pid

    def supervisord(self) -> int:
        (pid,) = self.running("supervisord")
        return pid

    def run(self, *command: str, timeout: float = 120) -> subprocess.CompletedProcess[str]:
        """A command in the running container (as a container runtime's exec would run it)."""
        return buildah("run", "--isolation", "chroot", "-v", f"{self.data}:/data", self.name, "--", *command,
                       timeout=timeout, check=False)

    def output(self) -> str:
        """What the container printed (supervisord's and the appliance's lines), then buildah's."""
        inside = self.root / CONTAINER_LOG.lstrip("/")
        text = inside.read_text(errors="replace") if inside.exists() else ""
        return (text + self.log.read_text(errors="replace"))[-8000:]

    def wait_until(self, condition: Callable[[], bool], what: str, timeout: float) -> float:
        """Poll ``condition`` until it holds, the container running; the seconds it took."""
        start = time.monotonic()
        while not condition():
            assert self.process.poll() is None, f"the container exited ({self.process.returncode}):\n{self.output()}"
            assert time.monotonic() - start < timeout, f"{what} not within {timeout}s:\n{self.output()}"
            time.sleep(0.2)
        return time.monotonic() - start

    def remove(self) -> None:
        """Stop it, then remove the working container (its file system with it)."""
        self.stop()
        buildah("rm", self.name, check=False)

    def stop(self) -> None:
        """Stop it as a container runtime would: SIGTERM to supervisord."""
        if self.process.poll() is None:
            for pid in self.running("supervisord"):
                os.kill(pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=90)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait(timeout=30)


def start(config: dict[str, Any], name: str, data: Path, *env: str) -> Container:
    """A working container of the image, its CMD run in the background with ``data`` as /data; its output goes
    to ``<data>.log``."""
    buildah("rm", name, check=False)  # a leftover of an interrupted run
    buildah("from", "--pull=never", "--name", name, IMAGE)
    # buildah 1.28's run mounts the image's own VOLUME over a --volume given for the same path: the working
    # container forgets it, so that /data is the directory given here (as `podman run -v` makes it)
    buildah("config", "--volume", "/data-", name)
    for assignment in env:
        buildah("config", "--env", assignment, name)
    log = data.parent / f"{data.name}.log"
    root = Path(buildah("mount", name).stdout.strip())
    # The container's user must be able to open its own output again (supervisord writes to /dev/stdout): runc and
    # crun give the container's stdio to its user for that; buildah's chroot isolation hands it root's pipes. So
    # the CMD runs with its output in a file of the container's user (CONTAINER_LOG), as it is under podman.
    command = ["sh", "-c", f'exec "$@" >>{CONTAINER_LOG} 2>&1', "sh", *config["OCIv1"]["config"]["Cmd"]]
    with log.open("ab") as output:
        process = subprocess.Popen([*BUILDAH, "run", "--isolation", "chroot", "-v", f"{data}:/data", name, "--",
                                    *command], stdout=output, stderr=subprocess.STDOUT, start_new_session=True)
    return Container(name, data, process, log, root)


def data_volume(parent: Path) -> Path:
    """A host directory for /data, owned by the image's user (as `chown 10001:10001` before a bind mount)."""
    data = parent / "data"
    data.mkdir(mode=0o700)
    os.chown(data, UID, UID)
    return data
