"""``systemctl start kumiho-ce`` as systemd would run it, on a first boot: the unit's ExecStartPre= (doctor) and
ExecStart= (serve) read from the unit file, with its Environment=, the directories systemd creates (an empty
/var/lib/kumiho-ce, an /etc/kumiho-ce holding no config.toml) and the notify socket and watchdog systemd passes,
paths moved under the test's directory and the installation (/opt/kumiho-ce/.venv) being this virtual
environment. The appliance must start, say READY=1, ping the watchdog, find the model `make install` placed
beside it, and stop cleanly on SIGTERM. ``make test-install-service`` does the same after a real install."""

from __future__ import annotations

import json
import signal
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import httpx

from appliance.config import load_settings
from appliance.inference.install import chat_models
from tests.appliance_process import free_port
from tests.systemd.service import UNIT, NotifySocket, Unit, as_main_process, manager_environment, start

INSTALLATION = "/opt/kumiho-ce/.venv"


def first_boot(root: Path, installation: str) -> Callable[[str], str]:
    """What systemd has made before ExecStartPre= runs: StateDirectory= (empty, 0700) and
    ConfigurationDirectory= (no file in it); paths of the unit moved under ``root``, the installation to
    ``installation``."""
    (root / "var" / "lib" / "kumiho-ce").mkdir(parents=True, mode=0o700)
    (root / "etc" / "kumiho-ce").mkdir(parents=True)

    def moved(word: str) -> str:
        if word.startswith(INSTALLATION):
            return installation + word[len(INSTALLATION):]
        if word.startswith(("/var/lib/kumiho-ce", "/etc/kumiho-ce")):
            return str(root) + word
        return word

    return moved


def run_unit(root: Path, moved: Callable[[str], str], logs: Path, unit_file: Path = UNIT,
             this_checkout: bool = True) -> dict[str, object]:
    """Run the commands of ``unit_file`` as systemd would and check each step; what doctor and `kumiho-ce models
    list` found, for the caller's checks. ``this_checkout``: the installation is this virtual environment."""
    unit = Unit.read(unit_file)
    state = Path(moved("/var/lib/kumiho-ce"))
    port = free_port()
    # a drop-in (`systemctl edit kumiho-ce`) of the test: a free port, and no working-memory listener on the
    # shared 6379 (other tests' appliances run on this machine)
    drop_in = {"KUMIHO_CE_PORT": str(port), "KUMIHO_CE_KUMIHO__REDIS_PORT": "0"}
    with NotifySocket(path=root / "notify.sock") as manager:
        pre = manager_environment(unit, moved, state, manager.address, False, this_checkout) | drop_in
        doctor = subprocess.run([*unit.command("ExecStartPre", moved), "--json"], env=pre, capture_output=True,
                                text=True, timeout=300)
        assert doctor.returncode == 0, f"ExecStartPre (doctor) failed, so the start would: {doctor.stdout}"
        checks = {c["name"]: c for c in json.loads(doctor.stdout)}
        main = manager_environment(unit, moved, state, manager.address, True, this_checkout) | drop_in
        process = start(as_main_process(unit.command("ExecStart", moved)), main, logs)
        try:
            manager.wait_for("READY=1", 240, alive=lambda: process.poll() is None)
            assert httpx.get(f"http://127.0.0.1:{port}/api/_ready", timeout=10).status_code == 200
            manager.wait_for("WATCHDOG=1", 60, alive=lambda: process.poll() is None)  # WatchdogSec=: first at once
            # where the service finds its model (exit 1 when it finds none)
            models = subprocess.run([moved(f"{INSTALLATION}/bin/kumiho-ce"), "models", "path", "--json"],
                                    env=pre, capture_output=True, text=True, timeout=120)
            process.send_signal(signal.SIGTERM)  # systemctl stop
            manager.wait_for("STOPPING=1", 60)
            assert process.wait(timeout=int(unit.one("TimeoutStopSec"))) == 0
        finally:
            if process.poll() is None:
                process.kill()
                process.wait()
    assert (state / "graph").exists() and oct(state.stat().st_mode & 0o777) == "0o700"
    return {"doctor": checks, "models": models}


def test_the_units_commands_start_the_appliance_on_a_first_boot_with_no_configuration(tmp_path: Path) -> None:
    moved = first_boot(tmp_path, sys.prefix)
    found = run_unit(tmp_path, moved, tmp_path / "journal.log")
    doctor = found["doctor"]
    assert isinstance(doctor, dict) and not [c for c in doctor.values() if c["status"] == "fail"]
    # the settings the service ran with: no config file, the unit's data directory
    assert load_settings(None, data_dir=moved("/var/lib/kumiho-ce")).inference.chat_model == "default"
    models = found["models"]
    assert isinstance(models, subprocess.CompletedProcess)
    default, entry = next(iter(chat_models().items()))
    beside = Path(sys.prefix) / "share" / "kumiho-ce" / "models" / entry["file"]
    if beside.is_file():  # `make install` placed it beside the appliance: the service finds it there
        assert models.returncode == 0, models.stderr
        assert json.loads(models.stdout) == {"name": default, "path": str(beside), "found_in": "installation"}
        assert doctor["chat_model"]["status"] == "ok", doctor["chat_model"]
    else:  # none there (it was found elsewhere when `make models` ran): the service starts without one, warned
        assert models.returncode == 1 and default in models.stderr, models
        assert doctor["chat_model"]["status"] == "warn", doctor["chat_model"]
