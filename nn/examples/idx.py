"""Reading IDX files (the format of the MNIST distribution), plain or gzipped.

Layout: two zero bytes, a type code, the number of dimensions d, then d big-endian uint32 sizes and
the data, big-endian, row-major.
"""
import gzip
import os
import struct

import numpy as np

TYPES = {0x08: np.uint8, 0x09: np.int8, 0x0B: np.dtype(">i2"), 0x0C: np.dtype(">i4"), 0x0D: np.dtype(">f4"),
         0x0E: np.dtype(">f8")}


def read_idx(path):
    """The array stored in IDX file `path` (a .gz name is decompressed), in native byte order."""
    path = os.fspath(path)
    opener = gzip.open if path.endswith(".gz") else open
    with opener(path, "rb") as f:
        raw = f.read()
    if len(raw) < 4 or raw[0] != 0 or raw[1] != 0:
        raise ValueError(f"{path}: not an IDX file (the first two bytes must be zero)")
    code, ndim = raw[2], raw[3]
    if code not in TYPES:
        raise ValueError(f"{path}: unknown IDX type code 0x{code:02x}; expected one of "
                         f"{', '.join(f'0x{c:02x}' for c in TYPES)}")
    header = 4 + 4 * ndim
    if len(raw) < header:
        raise ValueError(f"{path}: truncated IDX header ({len(raw)} bytes, {ndim} dimensions)")
    shape = struct.unpack(f">{ndim}I", raw[4:header])
    dtype = np.dtype(TYPES[code])
    count = int(np.prod(shape, dtype=np.int64))
    if len(raw) - header != count * dtype.itemsize:
        raise ValueError(f"{path}: IDX header says {shape} of {dtype} ({count * dtype.itemsize} bytes), "
                         f"the file holds {len(raw) - header}")
    data = np.frombuffer(raw, dtype, count, header).reshape(shape)
    return data.astype(dtype.newbyteorder("="))


def write_idx(path, array):
    """Writes `array` as an IDX file (gzipped when `path` ends in .gz); used by tests and tools."""
    array = np.asarray(array)
    for code, t in TYPES.items():
        t = np.dtype(t)
        if (t.kind, t.itemsize) == (array.dtype.kind, array.dtype.itemsize):
            break
    else:
        raise ValueError(f"write_idx: no IDX type for {array.dtype}")
    body = bytes([0, 0, code, array.ndim]) + struct.pack(f">{array.ndim}I", *array.shape) + \
        np.ascontiguousarray(array, dtype=t).tobytes()
    opener = gzip.open if os.fspath(path).endswith(".gz") else open
    with opener(path, "wb") as f:
        f.write(body)
