"""Minimal safetensors reader and writer (no `safetensors` package needed).

File layout: u64 little-endian N, then N bytes of JSON header, then the data buffer. The header maps each
tensor name to {"dtype", "shape", "data_offsets": [begin, end]} (byte offsets into the data buffer) and may hold
"__metadata__" (str -> str). Tensors are little-endian and row-major.

Reading returns numpy arrays (copies, so they outlive the file); writing takes numpy arrays or torch tensors
and writes F32 (the only dtype rlcpp's golden files use) unless the array is an integer or float64 one.
"""

import json
import os
import struct

import numpy as np

# safetensors dtype name -> numpy dtype. BF16 has no numpy type; it is widened to float32 on read.
_NUMPY_OF = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}
_NAME_OF = {dt: name for name, dt in _NUMPY_OF.items()}
_BF16_BYTES = 2
# A header larger than this is not a safetensors file (the official library refuses above 100 MB).
_MAX_HEADER_BYTES = 100 * 1000 * 1000


class SafetensorsError(ValueError):
    pass


def read_header(path):
    """Returns (header dict without __metadata__, metadata dict, byte offset of the data buffer)."""
    with open(path, "rb") as f:
        prefix = f.read(8)
        if len(prefix) != 8:
            raise SafetensorsError(f"{path}: file is {len(prefix)} bytes, shorter than the 8-byte header length")
        (n,) = struct.unpack("<Q", prefix)
        if n > _MAX_HEADER_BYTES:
            raise SafetensorsError(f"{path}: header length {n} bytes is implausible (limit {_MAX_HEADER_BYTES})")
        raw = f.read(n)
        if len(raw) != n:
            raise SafetensorsError(f"{path}: header says {n} bytes but only {len(raw)} follow")
    try:
        header = json.loads(raw.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise SafetensorsError(f"{path}: header is not valid JSON: {e}") from e
    if not isinstance(header, dict):
        raise SafetensorsError(f"{path}: header is a {type(header).__name__}, expected a JSON object")
    metadata = header.pop("__metadata__", None) or {}
    return header, metadata, 8 + n


def read(path):
    """Reads every tensor of `path` into {name: numpy array}, in file order. Checks offsets and sizes."""
    header, _, data_start = read_header(path)
    file_bytes = os.path.getsize(path)
    data_bytes = file_bytes - data_start
    out = {}
    with open(path, "rb") as f:
        for name, info in header.items():
            where = f"{path}: tensor '{name}'"
            try:
                dtype, shape, (begin, end) = info["dtype"], info["shape"], info["data_offsets"]
            except (KeyError, TypeError, ValueError) as e:
                raise SafetensorsError(f"{where}: header entry {info!r} lacks dtype/shape/data_offsets") from e
            if any((not isinstance(d, int)) or d < 0 for d in shape):
                raise SafetensorsError(f"{where}: shape {shape} must be non-negative integers")
            if dtype != "BF16" and dtype not in _NUMPY_OF:
                raise SafetensorsError(f"{where}: dtype {dtype} unsupported (expected one of "
                                       f"{sorted(list(_NUMPY_OF) + ['BF16'])})")
            numel = int(np.prod(shape, dtype=np.int64)) if shape else 1
            item = _BF16_BYTES if dtype == "BF16" else _NUMPY_OF[dtype].itemsize
            if not (0 <= begin <= end <= data_bytes):
                raise SafetensorsError(f"{where}: data_offsets [{begin}, {end}] outside the {data_bytes}-byte buffer")
            if end - begin != numel * item:
                raise SafetensorsError(f"{where}: {end - begin} bytes for shape {shape} of {dtype} "
                                       f"(expected {numel * item})")
            f.seek(data_start + begin)
            raw = f.read(end - begin)
            if dtype == "BF16":
                # bf16 is the upper half of an fp32: widen by shifting into the high 16 bits.
                arr = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
            else:
                arr = np.frombuffer(raw, dtype=_NUMPY_OF[dtype]).copy()
            out[name] = arr.reshape(shape)
    return out


def _to_numpy(value):
    if hasattr(value, "detach"):  # a torch tensor; imported lazily so this module works without torch
        value = value.detach().cpu().contiguous().numpy()
    arr = np.asarray(value)
    if arr.dtype.kind == "f" and arr.dtype != np.float64:
        arr = arr.astype("<f4")
    elif arr.dtype == np.float64:
        arr = arr.astype("<f8")
    elif arr.dtype.kind in "iub":
        arr = arr.astype(arr.dtype.newbyteorder("<"))
    else:
        raise SafetensorsError(f"cannot write a numpy array of dtype {arr.dtype}")
    return np.require(arr, requirements="C")  # (np.ascontiguousarray would turn a 0-d array into 1-d)


def write(path, tensors, metadata=None, keep_float64=False):
    """Writes {name: array or tensor} to `path` atomically (temp file + rename), in the given order.

    Floating arrays are written as F32 unless keep_float64 and the array is float64.
    """
    arrays = []
    for name, value in tensors.items():
        arr = _to_numpy(value)
        if arr.dtype == np.float64 and not keep_float64:
            arr = arr.astype("<f4")
        arrays.append((name, arr))
    header = {}
    if metadata:
        header["__metadata__"] = {str(k): str(v) for k, v in metadata.items()}
    offset = 0
    for name, arr in arrays:
        dtype_name = _NAME_OF.get(arr.dtype)
        if dtype_name is None:
            raise SafetensorsError(f"tensor '{name}': dtype {arr.dtype} has no safetensors name")
        header[name] = {"dtype": dtype_name, "shape": list(arr.shape), "data_offsets": [offset, offset + arr.nbytes]}
        offset += arr.nbytes
    raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
    raw += b" " * (-len(raw) % 8)  # pad so the data buffer starts 8-byte aligned, as the official writer does
    tmp = f"{path}.tmp{os.getpid()}"
    with open(tmp, "wb") as f:
        f.write(struct.pack("<Q", len(raw)))
        f.write(raw)
        for _, arr in arrays:
            f.write(arr.tobytes())
    os.replace(tmp, path)
