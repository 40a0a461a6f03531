"""The service unit, its configuration template and the install script, checked without starting anything:
``systemd-analyze verify`` and ``security`` on the unit, the template loads, the script's plan."""

from __future__ import annotations

import functools
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from appliance.config import load_settings
from appliance.errors import ConfigError
from tests.systemd.service import ROOT, UNIT, Unit

INSTALLED_CLI = "/opt/kumiho-ce/.venv/bin/kumiho-ce"
TEMPLATE = ROOT / "systemd" / "config.toml"
INSTALL = ROOT / "systemd" / "install.sh"
# `systemd-analyze security` of the unit (lower is safer): 1.7 before Type=notify and the hardening of this version
EXPOSURE = 1.1

def analyze(test: Callable[..., None]) -> Callable[..., None]:
    """A test that runs systemd-analyze: part of the test set-up (`make install-test` installs Debian's systemd
    package as root), so a missing one fails the test rather than skipping it."""
    @functools.wraps(test)
    def run(*args: Any, **kwargs: Any) -> None:
        assert shutil.which("systemd-analyze"), "systemd-analyze is missing: apt-get install systemd"
        test(*args, **kwargs)
    return run


def verify(text: str, tmp_path: Path, cli: Path = Path(sys.prefix) / "bin" / "kumiho-ce"
           ) -> subprocess.CompletedProcess[str]:
    """``systemd-analyze verify`` on ``text`` as kumiho-ce.service, its commands pointing at ``cli`` (this venv's
    kumiho-ce by default: verify checks that they are executable). It exits 0 on unknown keys and bad values
    too: those are the lines it prints."""
    unit = tmp_path / "kumiho-ce.service"
    unit.write_text(text.replace(INSTALLED_CLI, str(cli)))
    return subprocess.run(["systemd-analyze", "verify", str(unit)], capture_output=True, text=True, timeout=60)


@analyze
def test_systemd_analyze_verify_passes_on_the_unit(tmp_path: Path) -> None:
    checked = verify(UNIT.read_text(), tmp_path)
    assert checked.returncode == 0 and checked.stdout + checked.stderr == "", checked.stdout + checked.stderr


@analyze
def test_the_verify_check_sees_a_broken_unit(tmp_path: Path) -> None:
    broken = UNIT.read_text().replace("Type=notify", "Type=notifyy").replace("LimitCORE=0", "LimitCOREE=0")
    checked = verify(broken, tmp_path)
    assert "notifyy" in checked.stderr and "LimitCOREE" in checked.stderr


@analyze
def test_the_security_exposure_stays_at_its_documented_level() -> None:
    report = subprocess.run(["systemd-analyze", "security", "--offline=yes", "--no-pager", str(UNIT)],
                            capture_output=True, text=True, timeout=60)
    found = re.search(r"Overall exposure level for kumiho-ce\.service: (\d+\.\d+)", report.stdout)
    assert found, report.stdout + report.stderr
    print(f'{{"systemd_analyze_security_exposure": {found.group(1)}}}')
    assert float(found.group(1)) <= EXPOSURE, report.stdout
    assert f"rates it **{EXPOSURE}**" in (ROOT / "docs" / "install.md").read_text()  # the documented figure


def test_the_unit_is_a_notify_service_with_a_watchdog_limits_and_loopback_only() -> None:
    unit = Unit.read()
    assert unit.one("Type") == "notify" and unit.one("NotifyAccess") == "main"
    assert unit.watchdog_usec() >= 10_000_000  # pings every half: a busy machine gets time
    assert unit.one("LimitCORE") == "0"  # a core dump would hold memories and the token
    assert unit.one("MemoryMax") and unit.one("TasksMax").isdigit()
    assert unit.one("IPAddressDeny") == "any" and unit.one("IPAddressAllow") == "localhost"
    # the first start needs no configuration file: none is forced on the appliance
    assert "KUMIHO_CE_CONFIG" not in unit.environment()
    assert unit.one("ConfigurationDirectory") == "kumiho-ce"
    assert unit.one("ExecStart") == f"{INSTALLED_CLI} serve"
    assert unit.one("ExecStartPre") == f"{INSTALLED_CLI} doctor"


def test_the_configuration_template_is_the_defaults_and_each_of_its_lines_loads(tmp_path: Path) -> None:
    """The install step writes the template as /etc/kumiho-ce/config.toml: as written it changes nothing, and
    every commented setting, uncommented alone, is a valid configuration (the template cannot go stale)."""
    config = tmp_path / "config.toml"
    text = TEMPLATE.read_text()
    config.write_text(text)
    assert load_settings(config, data_dir=tmp_path).model_dump() == load_settings(None, data_dir=tmp_path).model_dump()
    settings_lines = [i for i, line in enumerate(text.splitlines()) if re.match(r"# [a-z_]+ = \S", line)]
    assert len(settings_lines) >= 8
    for i in settings_lines:
        lines = text.splitlines()
        lines[i] = lines[i][2:]
        config.write_text("\n".join(lines) + "\n")
        try:
            load_settings(config, data_dir=tmp_path)
        except ConfigError as exc:
            raise AssertionError(f"line {i + 1} of systemd/config.toml, uncommented: {exc.message}") from None


def fake_wheels(tmp_path: Path) -> Path:
    wheels = tmp_path / "wheels"
    wheels.mkdir()
    (wheels / "llama_cpp_python-0.3.36-cp311-cp311-linux_x86_64.whl").touch()
    return wheels


def test_the_install_script_dry_run_shows_every_step_and_changes_nothing(tmp_path: Path) -> None:
    root = tmp_path / "root"
    plan = subprocess.run(["sh", str(INSTALL), "--dry-run", "--root", str(root), "--llama-wheels",
                           str(fake_wheels(tmp_path))], capture_output=True, text=True, timeout=60)
    assert plan.returncode == 0, plan.stderr
    steps = plan.stdout
    for expected in (f"install -d -m 0700 {root}/var/lib/kumiho-ce", f"-m venv {root}/opt/kumiho-ce/.venv",
                     "install --force-reinstall --no-deps " + str(tmp_path / "wheels"), f"cp -R {ROOT}/pyproject.toml",
                     f"{root}/opt/kumiho-ce/.venv/share/kumiho-ce/models",
                     f"{UNIT} {root}/etc/systemd/system/kumiho-ce.service",
                     f"{TEMPLATE} {root}/etc/kumiho-ce/config.toml"):
        assert expected in steps, steps
    assert "useradd" not in steps and "chown" not in steps and "systemctl" not in steps  # --root: none of those
    assert not root.exists()
    # on the real system (still a dry run): the user, the ownership, systemd
    real = subprocess.run(["sh", str(INSTALL), "--dry-run", "--llama-wheels", str(tmp_path / "wheels")],
                          capture_output=True, text=True, timeout=60)
    assert real.returncode == 0, real.stderr
    assert "useradd --system" in real.stdout and "chown kumiho:kumiho /var/lib/kumiho-ce" in real.stdout


@pytest.mark.parametrize(("args", "says"), [
    ([], "pass --llama-wheels DIR"),
    (["--llama-wheels", "/nonexistent"], "holds no llama_cpp_python-*.whl"),
    (["--bogus"], "unknown option --bogus"),
])
def test_the_install_script_refuses_what_it_cannot_do_saying_why(tmp_path: Path, args: list[str], says: str) -> None:
    refused = subprocess.run(["sh", str(INSTALL), "--root", str(tmp_path / "root"), *args], capture_output=True,
                             text=True, timeout=60)
    assert refused.returncode == 2 and says in refused.stderr, refused.stderr
    assert not (tmp_path / "root").exists()
