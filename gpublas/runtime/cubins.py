"""Cubins built ahead, on a machine without a GPU, for a GPU machine that should not wait on nvcc.

A lent GPU machine has minutes, not hours: compiling every kernel module there with nvcc would spend
them. So the modules a run will load are recorded on the simulator, compiled here for the GPU's
architecture, and carried to the GPU machine in a folder that the cuda backend reads first:

1. record: `GPUBLAS_RECORD_MODULES=FILE` makes every process append one JSON line per kernel module
   it compiles (its text, defines and source name, the name relative to the project): the modules a
   test file or a benchmark really loads, generated ones included.
2. build: `python -m benchmarks.build_cubins --arch sm_90a --out DIR FILE...` compiles each recorded
   module (and, with `--families`, every family for float32 and float64) with nvcc, in parallel, into
   DIR, named by a key over the module's text, the headers and the nvcc flags (not nvcc's version: a
   cubin loads on any driver of its CUDA major version, which DIR's manifest records).
3. load: the cuda backend, with `GPUBLAS_CUBIN_DIR=DIR`, looks each module up there before compiling.
   A module found there is checked (size and checksum, as the cache checks its own) and loaded; one
   that fails to load turns the folder off for the process, said once on stderr, and every module
   is compiled as usual from then on. Each lookup is appended to `<cache dir>/cubins.log` ("hit" or
   "miss" and the module), so a run says what the next build should add.
"""
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from . import compiler, source

MANIFEST = "manifest.json"
PROJECT = source.src_dir().parent  # the folder holding cuda_src/ (and nn/ in a checkout)


def portable_name(source_name):
    """`source_name` relative to the project (cuda_src/gemm.cu, nn/cuda/conv.cu) when it lies inside,
    so a module's text, and with it its key, is the same on every machine."""
    try:
        return Path(source_name).resolve().relative_to(PROJECT.resolve()).as_posix()
    except (ValueError, OSError):
        return str(source_name)


def nvcc_flags(target, defines):
    """The flags every cuda-backend compile uses: -O3, C++17, -arch=target, the defines sorted."""
    return ["-O3", "-std=c++17", f"-arch={target}", *[f"-D{k}={v}" for k, v in sorted((defines or {}).items())]]


def module_body(text, source_name):
    """The text nvcc compiles: a #line naming the project-relative file, then the module's text."""
    return f'#line 1 "{portable_name(source_name)}"\n' + text


def file_name(body, flags, source_name):
    """<stem>-<key>.cubin: the key covers the body with the cuda_src/ headers it includes, and the flags
    (a change to a header that a module does not include leaves its cubin good)."""
    return f"{Path(source_name).stem}-{compiler.cache_key(source.with_includes(body), ' '.join(flags))}.cubin"


# ---- record ----

def record(text, defines, source_name):
    """Appends the module to $GPUBLAS_RECORD_MODULES (one JSON line, written in one call: processes
    appending at once do not interleave lines), when that variable is set."""
    path = os.environ.get("GPUBLAS_RECORD_MODULES")
    if not path:
        return
    line = json.dumps({"source_name": portable_name(source_name), "defines": defines or {}, "text": text})
    fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    try:
        os.write(fd, (line + "\n").encode())
    finally:
        os.close(fd)


def recorded(paths):
    """The distinct (text, defines, source_name) modules in record files, in first-seen order."""
    seen = {}
    for p in paths:
        for line in Path(p).read_text().splitlines():
            if line.strip():
                m = json.loads(line)
                key = (m["text"], json.dumps(m["defines"], sort_keys=True), m["source_name"])
                seen.setdefault(key, (m["text"], m["defines"], m["source_name"]))
    return list(seen.values())


def family_modules(roots, types=("float32", "float64")):
    """(text, {'real': C type}, name) for every family under each root and dtype: what
    launch.prebuild compiles."""
    from . import dtypes
    return [(source.read(f, root), {"real": dtypes.row(getattr(dtypes, d, d)).c}, portable_name(source.path(f, root)))
            for root in roots for f in source.families(root) for d in types]


# ---- build ----

def build(modules, target, out, workers=None, nvcc="nvcc", progress=True):
    """Compiles each module with nvcc for `target` into folder `out`; returns [(name, error or None)].
    A module already in `out` with a good checksum record is kept."""
    nvcc = shutil.which(nvcc) or nvcc
    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    version = subprocess.run([nvcc, "--version"], capture_output=True, text=True).stdout.strip().splitlines()[-1]
    # the manifest first: a folder carried to a GPU while the build goes on is used for what it holds
    (out / MANIFEST).write_text(json.dumps({"target": target, "nvcc": version}, indent=1))

    def one(module):
        text, defines, name = module
        flags = nvcc_flags(target, defines)
        body = module_body(text, name)
        dest = out / file_name(body, flags, name)
        if compiler.check_cached(dest) is None:
            return name, None
        with tempfile.TemporaryDirectory() as tmp:
            src, obj = Path(tmp) / Path(name).name, Path(tmp) / "out.cubin"
            src.write_text(body)
            cmd = [nvcc, "-cubin", *flags, "-I", str(source.src_dir()), str(src), "-o", str(obj)]
            try:
                compiler.run_compiler(cmd, what=target, output=obj, source_name=name)
            except Exception as e:  # reported, not raised: one bad module must not stop the others
                return name, str(e).splitlines()[0]
            data = obj.read_bytes()
        dest.with_name(dest.name + ".sha256").write_text(f"{len(data)} {hashlib.sha256(data).hexdigest()}\n")
        tmp = dest.with_name(dest.name + ".tmp")
        tmp.write_bytes(data)
        os.replace(tmp, dest)  # whole or absent, for a copy taken while the build goes on
        return name, None

    bar = None
    if progress:
        from tqdm import tqdm
        bar = tqdm(total=len(modules), desc=f"nvcc {target}", unit="module")
    results = []
    with ThreadPoolExecutor(workers or os.cpu_count() or 1) as pool:
        for r in pool.map(one, modules):
            results.append(r)
            if bar is not None:
                bar.update()
    if bar is not None:
        bar.close()
    return results


# ---- load (the cuda backend) ----

class Prebuilt:
    """The cuda backend's view of $GPUBLAS_CUBIN_DIR: lookup() gives a cubin's path or None."""

    def __init__(self, folder, target, driver_major):
        self.folder = Path(folder) if folder else None
        self.why_off = None
        if self.folder is None:
            self.why_off = "GPUBLAS_CUBIN_DIR is not set"
            return
        try:
            manifest = json.loads((self.folder / MANIFEST).read_text())
        except (OSError, ValueError) as e:
            self._off(f"it has no readable {MANIFEST} ({e})")
            return
        if manifest.get("target") != target:
            self._off(f"its cubins are for {manifest.get('target')}, this device needs {target}")
        elif _cuda_major(manifest.get("nvcc", "")) > driver_major:
            self._off(f"{manifest.get('nvcc')} is newer than the driver's CUDA {driver_major}")

    def _off(self, why):
        self.why_off = why
        print(f"gpublas: not using the prebuilt cubins in {self.folder}: {why}; compiling with nvcc", file=sys.stderr)

    def lookup(self, body, flags, source_name):
        if self.why_off:
            return None
        path = self.folder / file_name(body, flags, source_name)
        hit = compiler.check_cached(path) is None
        _log("hit" if hit else "miss", portable_name(source_name), flags)
        return path if hit else None

    def failed(self, path, error):
        """A prebuilt cubin did not load: the folder is off for this process."""
        self._off(f"{path.name} did not load ({error})")


def _cuda_major(version_line):
    import re
    m = re.search(r"(?:release |cuda_|V)(\d+)\.", version_line)
    return int(m.group(1)) if m else 0


def _log(what, name, flags):
    try:
        with open(compiler.cache_dir() / "cubins.log", "a") as f:
            f.write(f"{what} {name} {' '.join(flags[3:])}\n")
    except OSError:
        pass
