"""Finding and reading the CUDA C sources: cuda_src/ ships inside the installed package.

A kernel family is `<root>/<family>.cu`; the root is cuda_src/ unless a caller names another folder
(nn keeps its kernels in nn/cuda/ and passes that folder). Every root's .cu files include headers
from cuda_src/ only (the compilers get `-I cuda_src/`), so headers_digest() covers all of them.
"""
import functools
import hashlib
import re
from importlib import resources
from pathlib import Path

from . import dtypes

_COMMENTS = re.compile(r"//[^\n]*|/\*.*?\*/", re.S)
_KERNEL = re.compile(
    r"__global__\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?void\s+(?:__launch_bounds__\s*\([^)]*\)\s*)?"
    r"(?P<name>\w+)\s*\((?P<params>[^)]*)\)", re.S)

# struct-module codes, as PyCUDA's prepared calls use them
_SCALARS = {
    "float": "f", "double": "d", "int": "i", "int32_t": "i", "unsigned": "I", "unsigned int": "I",
    "uint32_t": "I", "long long": "q", "long long int": "q", "int64_t": "q", "ptrdiff_t": "q",
    "long": "q", "unsigned long long": "Q", "uint64_t": "Q", "size_t": "Q", "unsigned long": "Q",
    "bool": "?", "char": "b", "signed char": "b", "unsigned char": "B", "short": "h", "unsigned short": "H",
    "__half": "H", "__nv_bfloat16": "H",  # passed as their bit patterns (dtypes.scalar_arg)
}
# common.cuh's compute_t<real> (a family's compute type) after `real` is replaced: float for __half
_SCALARS.update({f"compute_t<{row.c}>": dtypes.TABLE[row.compute].arg for row in dtypes.TABLE.values()})
_SCALARS.update({row.c: row.arg for row in dtypes.TABLE.values() if row.dtype.kind == "c"})  # by value
_OBJECT_MACRO = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)[ \t]+(\S[^\n]*?)[ \t]*$", re.M)
_PARAM_MACRO = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(\w+)\((\w+)\)[ \t]+(\S[^\n]*?[^\\\s])[ \t]*$", re.M)
_QUALIFIERS = {"const", "volatile", "__restrict__", "__restrict", "restrict", "struct"}


@functools.lru_cache(maxsize=None)
def src_dir():
    """The folder holding the .cu files (the `cuda_src` package's data)."""
    return Path(str(resources.files("cuda_src")))


def path(family, root=None):
    """The file of kernel family `family`: <root>/<family>.cu, root defaulting to cuda_src/."""
    p = Path(root or src_dir()) / f"{family}.cu"
    if not p.exists():
        raise FileNotFoundError(f"no kernel family '{family}': {p} does not exist")
    return p


def families(root=None):
    """The kernel families under `root` (default cuda_src/), sorted."""
    return sorted(p.stem for p in Path(root or src_dir()).glob("*.cu"))


@functools.lru_cache(maxsize=None)
def read(family, root=None):
    return path(family, root).read_text()


@functools.lru_cache(maxsize=None)
def headers_digest():
    """A digest of every header a .cu file may include (part of the compile cache key)."""
    h = hashlib.sha256()
    for p in sorted(src_dir().glob("*.cuh")):
        h.update(p.name.encode() + p.read_bytes())
    return h.hexdigest()


_INCLUDE = re.compile(r'^[ \t]*#[ \t]*include[ \t]*"(?P<name>[^"]+)"', re.M)


def with_includes(text, _seen=None):
    """`text` with each `#include "x"` of a cuda_src/ header replaced by the header's text (once per
    header, as #pragma once does): what a kernel really contains, for readers of the source such as
    the simulator's barrier analysis. Compilers still get the #include and `-I cuda_src/`."""
    seen = set() if _seen is None else _seen

    def inline(m):
        p = src_dir() / m.group("name")
        if not p.is_file() or p.name in seen:
            return "" if p.name in seen else m.group(0)
        seen.add(p.name)
        return with_includes(p.read_text(), seen)

    return _INCLUDE.sub(inline, text)


_DEFINE = re.compile(r"^[ \t]*#[ \t]*define[ \t]+(?P<name>\w+)[ \t]+"
                     r"(?P<value>-?(?:0x[0-9a-fA-F]+|\d+))[uUlL]*[ \t]*(?://.*)?$", re.M)


@functools.lru_cache(maxsize=None)
def int_defines(filename, prefix="", root=None):
    """{name: value} of the integer #defines whose name starts with `prefix` in <root>/<filename>
    (a .cu or .cuh file; root defaults to cuda_src/): Python reads a kernel's constants (op codes,
    tile sizes) from the source instead of mirroring them by hand."""
    p = Path(root or src_dir()) / filename
    found = {m["name"]: int(m["value"], 0) for m in _DEFINE.finditer(p.read_text()) if m["name"].startswith(prefix)}
    if not found:
        raise LookupError(f"no integer #define starting with {prefix!r} in {p}")
    return found


def strip_comments(source):
    return _COMMENTS.sub(lambda m: "\n" * m.group(0).count("\n"), source)


def apply_defines(text, defines):
    for name, value in (defines or {}).items():
        text = _sub_word(re.escape(name), r"\b", lambda _, v=str(value): v, text)
    return text


def param_code(param):
    """'const float* __restrict__ a' -> 'P'; 'int n' -> 'i'."""
    if "*" in param or "[" in param:
        return "P"
    words = [w for w in param.replace("&", " ").split() if w not in _QUALIFIERS]
    type_name = " ".join(words[:-1])
    try:
        return _SCALARS[type_name]
    except KeyError:
        raise TypeError(f"kernel parameter '{param.strip()}': unsupported type '{type_name}'") from None


def expand_object_macros(text):
    """`text` with its one-line #defines expanded where a kernel parameter list may use them: object-like
    ones (`#define PARAMS int n, float* x`) and one-argument ones with token pasting
    (`#define STRIDES(p) long long p##0, long long p##1`), so that a family spells a list once."""
    for name, body in _OBJECT_MACRO.findall(text):
        text = _sub_word(name, r"\b", lambda _, body=body: body, text)
    for name, arg, body in _PARAM_MACRO.findall(text):
        def expand(m, arg=arg, body=body):
            value = m.group(1).strip()
            return re.sub(rf"\b{arg}\b", value, body.replace(f"{arg}##", value))
        text = _sub_word(name, r"\(\s*(\w+)\s*\)", expand, text)
    return text


def _sub_word(name, after, repl, text):
    """re.sub(rf"\\b{name}{after}", repl, text) for a name of word characters, an order of magnitude faster: the
    pattern starts with the name itself, which the regex engine finds by a literal search (a leading \\b makes it
    try every position), and a match preceded by a word character is left as it was."""
    def checked(m):
        at = m.start()
        return m.group(0) if at and (text[at - 1].isalnum() or text[at - 1] == "_") else repl(m)
    return re.sub(name + after, checked, text)


_UNIT = re.compile(r"^[ \t]*//[ \t]*sim unit:(?P<names>[^\n]*)$", re.M)


def sim_units(text, kernels):
    """The groups in which the sim backend compiles the kernels of family source `text` (`kernels`: all
    its kernel names, in order): one per `// sim unit: k1 k2 ...` line of the source, then one of the
    kernels no line names. Without such lines the family is one unit. The first unit is what a prefetch
    compiles: the kernels the simulator's launchers pick. A name that is no kernel of the family raises
    LookupError."""
    units, named = [], set()
    for m in _UNIT.finditer(text):
        unit = tuple(m["names"].split())
        unknown = [k for i, k in enumerate(unit) if k not in kernels or k in named or k in unit[:i]]
        if unknown or not unit:
            raise LookupError(f"'// sim unit:{m['names']}' names {', '.join(unknown) or 'no kernel'}: not a kernel "
                              f"of this family (or named twice); it has {', '.join(kernels)}")
        units.append(unit)
        named.update(unit)
    rest = tuple(k for k in kernels if k not in named)
    return units + [rest] if rest or not units else units


_SPREAD = re.compile(r"^[ \t]*//[ \t]*sim spread:(?P<names>[^\n]*)$", re.M)


def sim_spread(text, kernels):
    """The kernels of family source `text` named on `// sim spread: k1 k2 ...` lines: their launchers give each
    simulated thread a run of many elements (geometry.flat_geometry), so the simulator spreads their blocks over
    the cores however few threads a grid has (Kernel.spread_blocks). A name that is no kernel raises LookupError."""
    names = {k for m in _SPREAD.finditer(text) for k in m["names"].split()}
    unknown = sorted(names.difference(kernels))
    if unknown:
        raise LookupError(f"'// sim spread:' names {', '.join(unknown)}: not a kernel of this family; it has "
                          f"{', '.join(kernels)}")
    return names


def kernel_signatures(source, defines=None):
    """{kernel name: struct codes of its parameters} for every __global__ function in `source`."""
    text = apply_defines(expand_object_macros(strip_comments(with_includes(source))), defines)
    sigs = {}
    for m in _KERNEL.finditer(text):
        params = [p for p in m.group("params").split(",") if p.strip() and p.strip() != "void"]
        sigs[m.group("name")] = "".join(param_code(p) for p in params)
    return sigs
