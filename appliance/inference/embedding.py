"""Sentence embeddings: the default ONNX MiniLM, and a small deterministic embedder for fast tests.

Every embedder returns L2-normalised float32 rows, so a dot product is the cosine similarity.
"""

from __future__ import annotations

import hashlib
import re
import threading
from collections.abc import Sequence
from pathlib import Path
from typing import Any, Protocol

import numpy as np

from appliance.inference.models import manifest, model_file, verified


class Embedder(Protocol):
    model_id: str
    dim: int

    def embed(self, texts: Sequence[str]) -> np.ndarray: ...


class OnnxEmbedder:
    """A BERT-style sentence encoder in ONNX (mean pooling over the attention mask, then L2 norm)."""

    def __init__(self, model_path: Path, tokenizer_path: Path, *, model_id: str, max_length: int = 256,
                 batch_size: int = 32, threads: int = 0) -> None:
        import onnxruntime as ort
        from tokenizers import Tokenizer

        self._session = ort.InferenceSession(str(model_path), session_options(threads),
                                             providers=["CPUExecutionProvider"])
        self._inputs = {i.name for i in self._session.get_inputs()}
        self._tokenizer = Tokenizer.from_file(str(tokenizer_path))
        self._tokenizer.enable_truncation(max_length)
        self._tokenizer.enable_padding()
        self._lock = threading.Lock()  # one capacity slot: onnxruntime already uses every core
        self.model_id = model_id
        self.dim = int(self._session.get_outputs()[0].shape[-1])
        self.batch_size = batch_size

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        if not texts:
            return np.zeros((0, self.dim), dtype=np.float32)
        # batches of similar length waste less on padding (1.8x faster on conversation turns)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]))
        ordered = [texts[i] for i in order]
        parts = [self._embed_batch(ordered[i: i + self.batch_size]) for i in range(0, len(ordered), self.batch_size)]
        result = np.empty((len(texts), self.dim), dtype=np.float32)
        result[order] = np.concatenate(parts)
        return result

    def _embed_batch(self, texts: Sequence[str]) -> np.ndarray:
        encoded = self._tokenizer.encode_batch([t or " " for t in texts])
        ids = np.array([e.ids for e in encoded], dtype=np.int64)
        mask = np.array([e.attention_mask for e in encoded], dtype=np.int64)
        feeds = {"input_ids": ids, "attention_mask": mask, "token_type_ids": np.zeros_like(ids)}
        with self._lock:
            hidden = self._session.run(None, {k: v for k, v in feeds.items() if k in self._inputs})[0]
        weights = mask[..., None].astype(np.float32)
        pooled = (hidden * weights).sum(axis=1) / np.clip(weights.sum(axis=1), 1e-9, None)
        return _normalise(pooled)


def session_options(threads: int = 0) -> Any:
    """onnxruntime's options for the embedder's session (``benchmarks/embedder_bench.py`` measures them)."""
    import onnxruntime as ort

    options = ort.SessionOptions()
    options.intra_op_num_threads = threads
    options.log_severity_level = 3
    # No memory arena: it kept ~130 MB after the first batches (measured: RSS 307 → 178 MB over the
    # session) for ~1 ms more per query embedding; the appliance's whole RSS budget is 1.2 GB.
    options.enable_cpu_mem_arena = False
    return options


def default_embedder(threads: int = 0) -> OnnxEmbedder:
    """The bundled all-MiniLM-L6-v2 int8 model, verified by sha256; never downloads."""
    entry = manifest()["embedding"]["minilm-int8"]
    model, tokenizer = model_file(entry), model_file(entry["tokenizer"])
    return OnnxEmbedder(verified(model.locate(), model.sha256, model.size),
                        verified(tokenizer.locate(), tokenizer.sha256, tokenizer.size),
                        model_id="all-MiniLM-L6-v2-onnx-int8", threads=threads)


_WORD = re.compile(r"\w+")


class HashingEmbedder:
    """Deterministic bag of words and character trigrams, hashed into ``dim`` signed buckets.

    A real embedder for fast tests: texts sharing words (or, through trigrams, near-spellings) are similar,
    unrelated texts are near-orthogonal. It knows no synonyms; the real model's tests cover meaning.
    """

    def __init__(self, dim: int = 384) -> None:
        self.dim = dim
        self.model_id = f"hashing-{dim}"

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        rows = np.zeros((len(texts), self.dim), dtype=np.float32)
        for row, text in zip(rows, texts, strict=True):
            for feature, weight in _features(text):
                digest = hashlib.blake2b(feature.encode(), digest_size=8).digest()
                bucket = int.from_bytes(digest[:4], "little") % self.dim
                row[bucket] += weight if digest[4] & 1 else -weight
        return _normalise(rows)


def _features(text: str) -> list[tuple[str, float]]:
    words = [w.casefold() for w in _WORD.findall(text)]
    features = [("w:" + w, 1.0) for w in words]
    for w in words:
        padded = f"#{w}#"
        features += [("t:" + padded[i: i + 3], 0.3) for i in range(len(padded) - 2)]
    return features


def _normalise(rows: np.ndarray) -> np.ndarray:
    norms = np.linalg.norm(rows, axis=1, keepdims=True)
    return np.asarray(rows / np.clip(norms, 1e-12, None), dtype=np.float32)
