"""A fast approximate scan of many vectors: each row kept as 8-bit codes with its own scale, the query's
products with all of them computed by ONNX Runtime's integer matrix product (MatMulInteger, one thread),
which reads a quarter of the bytes of the float32 product. The resident table rescores the best candidates
of this scan exactly (resident.py), so the scores it returns are the float32 cosines.

Measured on the 2-core machine at 100k rows × 384 (benchmarks/search_bench.py ``vector_storage``): ~2× faster
than numpy's float32 product; 0.4 KiB per row. The model is a single MatMulInteger node, written here as
protobuf bytes so that no ONNX package is needed at run time.
"""

from __future__ import annotations

import threading

import numpy as np
import onnxruntime as ort

_OFFSET = 128  # codes are stored as uint8 (code + 128): ORT's fast kernel takes unsigned rows, signed query


def quantize(vectors: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows → (uint8 codes, float32 scales) with ``row ≈ (codes − 128) × scale``."""
    vectors = np.asarray(vectors, dtype=np.float32).reshape(-1, vectors.shape[-1])
    scales = np.abs(vectors).max(axis=1) / 127.0
    scales[scales == 0] = 1.0
    codes = np.rint(vectors / scales[:, None]).astype(np.int16) + _OFFSET
    return codes.astype(np.uint8), scales.astype(np.float32)


class Scanner:
    """Approximate dot products of a query with uint8-coded rows (thread-safe: ORT sessions are)."""

    def __init__(self, dim: int) -> None:
        options = ort.SessionOptions()
        options.intra_op_num_threads = 1  # memory-bound, and the other core embeds queries (resident.py)
        options.inter_op_num_threads = 1
        self._session = ort.InferenceSession(_matmul_integer(dim), options, providers=["CPUExecutionProvider"])

    def scores(self, codes: np.ndarray, scales: np.ndarray, query: np.ndarray) -> np.ndarray:
        """≈ rows @ query for the rows given as ``codes`` (C-contiguous) and ``scales``."""
        step = float(np.abs(query).max()) / 127.0 or 1.0
        q = np.rint(query / step).astype(np.int8)
        products: np.ndarray = self._session.run(None, {"a": codes, "b": q[:, None]})[0][:, 0]
        shifted = (products - _OFFSET * int(q.astype(np.int64).sum())).astype(np.float32)
        scores: np.ndarray = shifted * scales * np.float32(step)
        return scores


_scanners: dict[int, Scanner] = {}
_scanners_lock = threading.Lock()


def scanner(dim: int) -> Scanner:
    """One scanner per dimension for the process (a session costs a few ms to build)."""
    with _scanners_lock:
        if dim not in _scanners:
            _scanners[dim] = Scanner(dim)
        return _scanners[dim]


# -- the model, as protobuf (onnx.proto: ModelProto, GraphProto, NodeProto, ValueInfoProto) ---------------
def _varint(value: int) -> bytes:
    out = bytearray()
    while True:
        low, value = value & 0x7F, value >> 7
        out.append(low | 0x80 if value else low)
        if not value:
            return bytes(out)


def _field(number: int, value: int | str | bytes) -> bytes:
    if isinstance(value, int):
        return _varint(number << 3) + _varint(value)
    data = value.encode() if isinstance(value, str) else value
    return _varint(number << 3 | 2) + _varint(len(data)) + data


def _tensor(name: str, element: int, dims: tuple[int | str, ...]) -> bytes:
    shape = b"".join(_field(1, _field(2 if isinstance(d, str) else 1, d)) for d in dims)
    return _field(1, name) + _field(2, _field(1, _field(1, element) + _field(2, shape)))


def _matmul_integer(dim: int) -> bytes:
    """y[n, k] (int32) = a[n, dim] (uint8) × b[dim, k] (int8), opset 13."""
    uint8, int8, int32 = 2, 3, 6  # TensorProto.DataType
    node = _field(1, "a") + _field(1, "b") + _field(2, "y") + _field(4, "MatMulInteger")
    graph = (_field(1, node) + _field(2, "scan") + _field(11, _tensor("a", uint8, ("n", dim)))
             + _field(11, _tensor("b", int8, (dim, "k"))) + _field(12, _tensor("y", int32, ("n", "k"))))
    return _field(1, 8) + _field(8, _field(1, "") + _field(2, 13)) + _field(7, graph)
