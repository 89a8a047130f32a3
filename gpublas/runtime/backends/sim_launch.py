"""The sim backend's launches: the closure a kernel launches through, its record, and the bound launch that
keeps a geometry's record header.

Each call gets a record of its own (record.h's LaunchHeader, then the arguments at their C offsets, struct in
native alignment): the C side reads only it, so launches of one kernel from several host threads never see
each other's arguments. A kernel's checked geometry (launch.Kernel's plan) binds a launch that keeps the
40-byte header (bytes: nothing mutable is shared) and packs only the arguments each call; the header is packed
again when the backend's launch_state changes (thread order, fission switch, a spread flag), and every launch
under the random order packs a seed of its own.
"""
import ctypes
import struct

from .. import dtypes
from ..errors import LaunchError

ORDERS = {"forward": 0, "reverse": 1, "random": 2}
RANDOM = ORDERS["random"]
RECORD = "@6I2IQ"  # record.h's LaunchHeader: grid xyz, block xyz, flags, seed, dynamic shared bytes
_HEADER = struct.Struct(RECORD)  # 40 bytes, a multiple of every parameter's alignment
_C_TYPES = {"P": "pointer", "f": "float", "d": "double", "i": "int32", "I": "uint32", "q": "int64", "Q": "uint64",
            "?": "bool", "b": "int8", "B": "uint8", "h": "int16", "H": "uint16"}  # struct codes of parameters


def prepare(backend, module, name, argcodes, failure):
    """The launch(grid, block, shared, stream, args) of kernel `name` of `module` (a SimModule), with a `bind`
    attribute (see the module's docstring); failure(backend, lib, kernel, status) makes a failed launch's
    exception."""
    try:
        entry = getattr(module.lib, f"gpublas_launch_{name}")
        layout = getattr(module.lib, f"gpublas_arglayout_{name}")
    except AttributeError:
        raise LaunchError(f"no kernel '{name}' in {module.name}") from None
    fmt, parsed, packed, complex_at = dtypes.pack_layout(argcodes, RECORD)
    record = struct.Struct(fmt)
    sizes, offsets = (ctypes.c_int * 64)(), (ctypes.c_int * 64)()
    n = layout(sizes, offsets)
    if list(sizes[:n]) != parsed or list(offsets[:n]) != packed:
        raise LaunchError(f"kernel '{name}': parameter sizes {list(sizes[:n])} at offsets {list(offsets[:n])} "
                          f"from the compiler do not match {parsed} at {packed} parsed from its signature "
                          f"'{argcodes}'")
    entry.restype = ctypes.c_int
    entry.argtypes = [ctypes.c_char_p]
    address = ctypes.cast(entry, ctypes.c_void_p).value  # what a graph replay calls
    pack, fibers, lib = record.pack, int(name in module.fibers), module.lib
    block_fn = 8 if module.fission.get(name, 1) is None else 0  # the kernel has a fissioned version
    spread = module.spread.setdefault(name, [0])

    def launch(grid, block, shared, stream, args):
        # One record per call (grid, block, flags, seed, shared bytes, then the arguments): the
        # C side reads only this, so concurrent launches of one kernel cannot see each other's.
        if complex_at:
            args = dtypes.split_complex(args, complex_at)
        try:
            flags = fibers | backend.order << 1 | (block_fn if backend.fission else 0) | spread[0]
            rec = pack(*grid, *block, flags,
                       next(backend._seeds) & 0xFFFFFFFF,
                       shared, *args)
        except struct.error:
            raise _bad_argument(name, argcodes, args) from None
        if stream is not None and stream.capture is not None:
            return stream.capture.launch(address, rec, lib, name)
        status = entry(rec)
        if status:
            raise failure(backend, lib, name, status)

    pack_args = struct.Struct("@" + fmt[len(RECORD):]).pack  # the arguments alone, at the same offsets
    if _HEADER.size + struct.calcsize("@" + fmt[len(RECORD):]) != record.size:
        return launch

    def bind(grid, block, shared):
        """launch(grid, block, shared, None, args) for one checked geometry on the default stream: the
        header (the record's first 40 bytes) packed once and kept, each call packing only the arguments
        into a record of its own. Under the random thread order every launch takes a seed of its own, so
        the header is packed per call (launch)."""
        memo = [None, None]  # [the backend's launch_state when the header was packed, the header]

        def bound(args):
            if memo[0] != backend.launch_state:
                state = backend.launch_state
                flags = fibers | backend.order << 1 | (block_fn if backend.fission else 0) | spread[0]
                memo[1] = None if backend.order == RANDOM else _HEADER.pack(*grid, *block, flags, 0, shared)
                memo[0] = state
            header = memo[1]
            if header is None or complex_at:
                return launch(grid, block, shared, None, args)
            try:
                rec = header + pack_args(*args)
            except struct.error:
                raise _bad_argument(name, argcodes, args) from None
            status = entry(rec)
            if status:
                raise failure(backend, lib, name, status)

        return bound

    launch.bind = bind
    return launch


def _bad_argument(kernel, argcodes, args):
    """The TypeError for the first argument that does not fit its C type."""
    for i, (code, value) in enumerate(zip(argcodes, args)):
        try:
            struct.pack("@" + code, value)
        except struct.error as e:
            return TypeError(f"kernel '{kernel}': argument {i} ({_C_TYPES.get(code, code)}) cannot take "
                             f"{value!r}: {e}")
    return TypeError(f"kernel '{kernel}': grid, block or shared memory size out of range")
