"""The wheel: built from what the Containerfile copies (pyproject.toml, README.md, appliance/), installed into a
fresh virtual environment without the source tree, it holds every data file and serves the tool catalogue.

Built once for the module (~15 s), offline: no build isolation, no index. The new environment gets the
dependencies of the environment running the tests through a ``.pth`` file that names its site-packages as a
path. A path added that way is not a site directory, so the ``.pth`` files inside it are not executed, the
editable install's finder among them: ``appliance`` can only come from the wheel, which the tests check.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import site
import subprocess
import sys
import zipfile
from dataclasses import dataclass
from pathlib import Path

import pytest

import appliance
from appliance.inference import models
from appliance.mcp_api import catalogue

SOURCE = Path(appliance.__file__).resolve().parent  # the appliance/ under test
COPIED = ("pyproject.toml", "README.md")  # beside appliance/, as the Containerfile copies them

# What the installed package is asked, run by the new environment's interpreter from an empty directory.
PROBE = """
import json, sys
import appliance
from appliance.inference import models, prompts
from appliance.inference import models
from appliance.mcp_api import catalogue

print(json.dumps({
    "file": appliance.__file__,
    "version": appliance.__version__,
    "tools": sorted(catalogue.tools()),
    "prompts": prompts.names(),
    "chat_models": sorted(models.manifest()["chat"]),
    "modules": {name: getattr(module, "__file__", None) for name, module in sys.modules.items()
                if name == "appliance" or name.startswith("appliance.")},
}))
"""


@dataclass(frozen=True)
class Installed:
    wheel: Path
    venv: Path
    package: Path  # appliance/ in the new environment's site-packages
    workdir: Path  # an empty directory outside the repository, the cwd of every command

    def run(self, *command: str | Path) -> subprocess.CompletedProcess[str]:
        # as a user's shell runs it: none of this checkout's paths, none of the tests' settings (their empty
        # models_dir would replace the installation's models directory)
        env = {k: v for k, v in os.environ.items()
               if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV") and not k.startswith("KUMIHO_CE_")}
        return subprocess.run([str(c) for c in command], cwd=self.workdir, env=env, capture_output=True, text=True,
                              timeout=120, check=False)


def _run(*command: str | Path, cwd: Path) -> str:
    done = subprocess.run([str(c) for c in command], cwd=cwd, capture_output=True, text=True, timeout=240,
                          check=False)
    assert done.returncode == 0, f"{' '.join(map(str, command))} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return done.stdout


def _data_files(root: Path) -> dict[str, str]:
    """sha256 of every file under ``root`` but Python sources and bytecode, by path relative to ``root``."""
    return {path.relative_to(root).as_posix(): hashlib.sha256(path.read_bytes()).hexdigest()
            for path in sorted(root.rglob("*"))
            if path.is_file() and path.suffix not in (".py", ".pyc", ".pyo") and "__pycache__" not in path.parts}


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    base = tmp_path_factory.mktemp("wheel")
    tree, dist, venv, workdir = base / "src", base / "dist", base / "venv", base / "work"
    workdir.mkdir()
    shutil.copytree(SOURCE, tree / "appliance", ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo"))
    for name in COPIED:
        shutil.copy2(SOURCE.parent / name, tree / name)
    _run(sys.executable, "-m", "pip", "wheel", "--quiet", "--no-deps", "--no-build-isolation", "--no-index",
         "--wheel-dir", dist, tree, cwd=base)
    (wheel,) = dist.glob("kumiho_ce-*.whl")
    _run(sys.executable, "-m", "venv", "--without-pip", venv, cwd=base)
    python = venv / "bin" / "python"
    _run(sys.executable, "-m", "pip", "--python", python, "install", "--quiet", "--no-deps", "--no-index", wheel,
         cwd=workdir)
    purelib = Path(_run(python, "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])", cwd=workdir)
                   .strip())
    # after the install: pip would otherwise see the editable kumiho-ce of the test environment
    (purelib / "_test_dependencies.pth").write_text("\n".join(site.getsitepackages()) + "\n")
    return Installed(wheel, venv, purelib / "appliance", workdir)


def test_every_data_file_of_the_source_tree_is_in_the_wheel(installed: Installed) -> None:
    source = _data_files(SOURCE)
    assert "inference/manifest.toml" in source and any(name.startswith("inference/prompts/") for name in source)
    with zipfile.ZipFile(installed.wheel) as wheel:
        packed = {name.removeprefix("appliance/") for name in wheel.namelist() if name.startswith("appliance/")}
        assert not [name for name in packed if name.endswith((".pyc", ".pyo"))]
    assert sorted(set(source) - packed) == [], "data files missing from the wheel ([tool.setuptools.package-data])"
    assert _data_files(installed.package) == source  # installed, byte for byte


UI_FILES = ("ui/index.html", "ui/docs.html", "ui/assets/app.js", "ui/assets/api.js", "ui/assets/style.css",
            "ui/assets/docs.js", "ui/assets/views/graph.js", "ui/vendor/VENDORED.md",
            "ui/vendor/swagger-ui-dist/swagger-ui-bundle.js", "ui/vendor/swagger-ui-dist/swagger-ui.css",
            "ui/vendor/swagger-ui-dist/LICENSE", "ui/vendor/swagger-ui-dist/NOTICE",
            "ui/vendor/force-graph/force-graph.min.js", "ui/vendor/force-graph/LICENSE",
            "ui/vendor/force-graph/THIRD-PARTY-LICENSES.txt")


def test_the_web_ui_and_its_vendored_libraries_are_in_the_wheel(installed: Installed) -> None:
    with zipfile.ZipFile(installed.wheel) as wheel:
        packed = set(wheel.namelist())
    assert [name for name in UI_FILES if f"appliance/{name}" not in packed] == []
    for name in UI_FILES:  # installed, byte for byte: the pages and the libraries run offline from here
        assert (installed.package / name).read_bytes() == (SOURCE / name).read_bytes(), name


def test_the_installed_wheel_lists_the_tools_and_reads_its_data(installed: Installed) -> None:
    done = installed.run(installed.venv / "bin" / "python", "-c", PROBE)
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout)
    package = installed.package.resolve()
    assert Path(found["file"]).resolve().parent == package  # the wheel's appliance, not the source tree's
    outside = {name: file for name, file in found["modules"].items()
               if file is None or not Path(file).resolve().is_relative_to(package)}
    assert outside == {}, "modules imported from outside the installed wheel"
    assert found["version"] == appliance.__version__
    assert found["tools"] == sorted(catalogue.tools()) and len(found["tools"]) >= 26
    assert found["prompts"] and "summarize_session" in found["prompts"]
    assert found["chat_models"]


def test_the_installed_command_starts(installed: Installed) -> None:
    done = installed.run(installed.venv / "bin" / "kumiho-ce", "--help")
    assert done.returncode == 0, done.stderr[-3000:]
    assert "serve" in done.stdout and "doctor" in done.stdout
    version = installed.run(installed.venv / "bin" / "kumiho-ce", "version")
    assert version.returncode == 0 and version.stdout.strip() == appliance.__version__


def test_the_installed_command_finds_a_model_in_its_own_environment(installed: Installed) -> None:
    """The installation's models directory is the environment's share/kumiho-ce/models: a model placed there once
    (as `make models`, the image and the bundle do) is found whatever the data directory."""
    name, entry = next((n, e) for n, e in models.manifest()["chat"].items() if e.get("default"))
    placed = installed.venv / "share" / "kumiho-ce" / "models" / entry["file"]
    placed.parent.mkdir(parents=True)
    with placed.open("wb") as handle:  # sparse: found by its size; the sha256 is checked at load and by verify
        handle.truncate(entry["size"])
    try:
        for data_dir in ("first", "second"):
            done = installed.run(installed.venv / "bin" / "kumiho-ce", "--data-dir", installed.workdir / data_dir,
                                 "models", "path", name, "--json")
            assert done.returncode == 0, done.stderr[-3000:]
            assert json.loads(done.stdout) == {"name": name, "path": str(placed), "found_in": "installation"}
    finally:
        placed.unlink()
