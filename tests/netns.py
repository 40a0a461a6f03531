"""Run a test body in a private network namespace holding only ``lo`` (with ``PRIVATE_ADDRESS`` on it), so that
an appliance bound beyond loopback can be tried without listening on any real network.

The body runs in a forked child that leaves the parent's namespace (``unshare(CLONE_NEWNET)``); processes it
starts share the namespace. Its failure comes back to the test as an AssertionError with the child's traceback.
Needs root (CI runs as root); elsewhere the test is skipped with the reason.
"""

from __future__ import annotations

import ctypes
import os
import shutil
import subprocess
import traceback
from collections.abc import Callable

import pytest

PRIVATE_ADDRESS = "10.200.0.1"  # not loopback to the appliance (Settings.is_loopback), reachable only here
_CLONE_NEWNET = 0x40000000
_CANNOT = 77  # the child's exit status when it cannot make a namespace


def run_in_private_network(body: Callable[[], None]) -> None:
    if os.geteuid() != 0 or shutil.which("ip") is None:
        pytest.fail("this test binds beyond loopback in a private network namespace: run the suite as root "
                    "with iproute2 installed (as CI does; `make install-test` installs it as root)")
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:  # the child: never returns into pytest
        os.close(read_end)
        status, report = 0, ""
        try:
            if ctypes.CDLL(None, use_errno=True).unshare(_CLONE_NEWNET) != 0:
                status, report = _CANNOT, f"unshare(CLONE_NEWNET) failed: {os.strerror(ctypes.get_errno())}"
            else:
                subprocess.run(["ip", "link", "set", "lo", "up"], check=True)
                subprocess.run(["ip", "addr", "add", f"{PRIVATE_ADDRESS}/32", "dev", "lo"], check=True)
                body()
        except BaseException:  # everything, failures included, goes back to the parent
            status, report = 1, traceback.format_exc()
        with os.fdopen(write_end, "w") as channel:
            channel.write(report)
        os._exit(status)
    os.close(write_end)
    with os.fdopen(read_end) as channel:
        report = channel.read()
    _, wait_status = os.waitpid(pid, 0)
    status = os.waitstatus_to_exitcode(wait_status)
    if status == _CANNOT:
        pytest.fail(f"no private network namespace could be made here: {report}")
    assert status == 0, f"the test body failed in its network namespace:\n{report}"
