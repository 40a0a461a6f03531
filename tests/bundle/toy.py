"""A toy bundle for the fast install.sh tests: the real builder's layout and manifest, the real install.sh, and
hand-made wheels of a stand-in ``kumiho-ce`` (its command records how ``models install`` was called), a
dependency it declares, and a package installed without its dependencies. pip's wheel comes from the Python
running the tests (ensurepip's own copy), so nothing is fetched."""

from __future__ import annotations

import base64
import ensurepip
import hashlib
import os
import platform
import sys
import tarfile
import zipfile
from pathlib import Path

from bundle.build import Contents, archive, stage

ROOT = Path(__file__).resolve().parents[2]
TOY_MODEL = "toy-chat-model"

TOY_COMMAND = '''
import json, os, pathlib, sys

def main():
    if sys.argv[1:] == ["version"]:
        print("0.0.1")
        return 0
    if sys.argv[1:3] == ["models", "install"]:
        target = pathlib.Path(os.environ["KUMIHO_CE_MODELS_DIR"])
        target.mkdir(parents=True, exist_ok=True)
        data_dir = pathlib.Path(os.environ["KUMIHO_CE_DATA_DIR"])
        call = {"args": sys.argv[3:], "empty_data_dir": data_dir.is_dir() and not any(data_dir.iterdir())}
        (target / "install-call.json").write_text(json.dumps(call))
        return 0
    return 2
'''


def make_wheel(directory: Path, name: str, version: str, files: dict[str, str], requires: tuple[str, ...] = (),
               scripts: dict[str, str] | None = None) -> Path:
    """A pure-Python wheel as pip builds them (METADATA, WHEEL, entry points, RECORD with hashes)."""
    dist_info = f"{name}-{version}.dist-info"
    members = dict(files)
    members[f"{dist_info}/METADATA"] = ("Metadata-Version: 2.1\n" f"Name: {name}\nVersion: {version}\n"
                                        + "".join(f"Requires-Dist: {r}\n" for r in requires))
    members[f"{dist_info}/WHEEL"] = "Wheel-Version: 1.0\nGenerator: tests\nRoot-Is-Purelib: true\nTag: py3-none-any\n"
    if scripts:
        members[f"{dist_info}/entry_points.txt"] = "[console_scripts]\n" + "".join(
            f"{command} = {target}\n" for command, target in scripts.items())
    record = []
    for member, text in members.items():
        digest = base64.urlsafe_b64encode(hashlib.sha256(text.encode()).digest()).rstrip(b"=").decode()
        record.append(f"{member},sha256={digest},{len(text.encode())}")
    members[f"{dist_info}/RECORD"] = "\n".join([*record, f"{dist_info}/RECORD,,"]) + "\n"
    path = directory / f"{name}-{version}-py3-none-any.whl"
    with zipfile.ZipFile(path, "w") as wheel:
        for member, text in members.items():
            wheel.writestr(member, text)
    return path


def bundled_pip() -> Path | None:
    found = sorted((Path(ensurepip.__file__).parent / "_bundled").glob("pip-*.whl"))
    return found[-1] if found else None


def build_toy_bundle(base: Path, machine: str | None = None, glibc: str = "") -> Path:
    """``base/dist/<name>.tar``: kumiho-ce 0.0.1 (toy) needing toydep, toytok installed --no-deps, one model."""
    pip_wheel = bundled_pip()
    assert pip_wheel is not None, "ensurepip has no bundled pip wheel"
    wheels = base / "wheels"
    wheels.mkdir(parents=True)
    toy = make_wheel(wheels, "kumiho_ce", "0.0.1", {"toy_ce.py": TOY_COMMAND}, requires=("toydep==1.0",),
                     scripts={"kumiho-ce": "toy_ce:main"})
    dep = make_wheel(wheels, "toydep", "1.0", {"toydep.py": "VALUE = 1\n"})
    # declares a dependency that is nowhere in the bundle: only --no-deps installs it
    tok = make_wheel(wheels, "toytok", "1.0", {"toytok.py": "VALUE = 2\n"}, requires=("torch>=2",))
    part = base / "models" / "toy_model_part1-1.0-py3-none-any.whl"
    part.parent.mkdir()
    part.write_bytes(b"model part")
    root = base / "stage" / "kumiho-ce-0.0.1-toy"
    stage(root, Contents(
        wheels=[toy, dep, tok, pip_wheel], model_wheels=[part],
        requirements=["kumiho-ce==0.0.1", "toydep==1.0"], no_deps=["toytok==1.0"],
        conf={"KUMIHO_CE_VERSION": "0.0.1", "PYTHON_VERSION": f"{sys.version_info.major}.{sys.version_info.minor}",
              "MACHINE": machine or platform.machine(), "GLIBC": glibc, "CPU_FLAGS": "",
              "CHAT_MODELS": TOY_MODEL},
        systemd_dir=ROOT / "systemd"))
    (base / "dist").mkdir()
    return archive(root, base / "dist")


def extract(tar_path: Path, into: Path) -> Path:
    """The bundle directory, extracted as a user would with ``tar -xf``."""
    into.mkdir(parents=True, exist_ok=True)
    with tarfile.open(tar_path) as tar:
        tar.extractall(into, filter="data")
        (top,) = {member.name.split("/", 1)[0] for member in tar.getmembers()}
    return into / top


def install_env(**extra: str) -> dict[str, str]:
    """The environment install.sh runs in: this test process's minus Python and kumiho-ce variables."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("PYTHONPATH", "PYTHONHOME", "VIRTUAL_ENV") and not k.startswith("KUMIHO_CE_")}
    env.update(extra)
    return env
