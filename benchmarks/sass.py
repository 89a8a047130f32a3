"""sass: what nvcc makes of every kernel in cuda_src/, read from the compiled code (no GPU needed).

`python -m benchmarks sass [--arch sm_90] [--json F]` compiles every kernel family (cuda_src/ and nn/cuda/)
in float and double for the architecture (what the cuda backend builds for it: sm_90 -> sm_90a), then reports per kernel: registers, spilled bytes (local memory),
static shared memory, theoretical occupancy (from registers, shared memory and the block size its
__launch_bounds__ names, else 256 threads), the SASS instruction mix (LDSM: ldmatrix; LD: generic loads, neither shared nor global; HGMMA: Hopper's
warpgroup MMA), and for the largest loop body (a GEMM's main loop): its length, its FFMA/DFMA/HMMA/HGMMA
share and the FLOPs it does per byte it reads from shared memory (an HGMMA's descriptor operands count). Those bound what a kernel can reach on a GPU: LDGSTS (cp.async) means global loads overlap the math,
LDS.128 means one shared load feeds four FMAs' operands, and a fat FMA share means the issue slots go to math.

nvcc comes from the PATH; cuobjdump from the PATH or the `nvidia-cuda-cuobjdump` wheel (the `sass` extra).
Builds are cached beside the kernel cache, so tests/test_sass.py and this suite compile each family once.
"""
import collections
import functools
import glob
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

from gpublas.runtime import compiler, source
from gpublas.runtime.backends.cuda import ARCH_SPECIFIC

from .harness import Report

DESCRIPTION = "registers, spills, occupancy and SASS instruction mix of every kernel (nvcc + cuobjdump)"
MIX = ("FFMA", "DFMA", "HMMA", "HGMMA", "LDS", "LDS.128", "LDSM", "LD", "LDG", "LDG.128", "LDGSTS", "BAR")
# per SM: max warps, registers, shared memory (bytes), max blocks
LIMITS = {70: (64, 65536, 96 << 10, 32), 75: (32, 65536, 64 << 10, 16), 80: (64, 65536, 164 << 10, 32),
          86: (48, 65536, 100 << 10, 16), 89: (48, 65536, 100 << 10, 24), 90: (64, 65536, 228 << 10, 32)}
_INSTR = re.compile(r"^\s*/\*([0-9a-f]{4,})\*/\s+(@!?U?P\w+\s+)?([A-Z][A-Za-z0-9_.]*)([^;]*);", re.M)
_FUNC = re.compile(r"Function : (\w+)")
_RES = re.compile(r"Function (\w+):\s*REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)")
_BOUNDS = re.compile(r"__launch_bounds__\s*\(\s*(\d+)[^)]*\)\s*(\w+)\s*\(")


# -- tools and builds -----------------------------------------------------------------------------
def tool(name):
    """Path of a CUDA binary tool (cuobjdump, nvdisasm): the PATH, else the NVIDIA pip wheels' bin/."""
    found = shutil.which(name)
    if found:
        return found
    for root in sys.path:
        for cand in sorted(glob.glob(os.path.join(root or ".", "nvidia", "*", "bin", name))):
            if os.access(cand, os.X_OK):
                return cand
    return None


def missing():
    """Why this machine cannot make the report ('' when it can)."""
    if shutil.which("nvcc") is None:
        return "nvcc is not on the PATH"
    if tool("cuobjdump") is None:
        return "cuobjdump not found (pip install 'gpublas[sass]': nvidia-cuda-cuobjdump)"
    return ""


@functools.lru_cache(maxsize=None)
def _nvcc_version():
    out = subprocess.run(["nvcc", "--version"], capture_output=True, text=True).stdout.strip().splitlines()
    return out[-1] if out else ""


def target(arch):
    """What nvcc builds for `arch`: what the cuda backend builds for such a device (sm_90 -> sm_90a)."""
    return ARCH_SPECIFIC.get(int(arch[3:]), arch) if re.fullmatch(r"sm_\d+", arch) else arch


def build(family, real, arch="sm_90", root=None, defines=None):
    """(cubin path, ptxas -v log) of <root>/<family>.cu (root: cuda_src/) with `real` and `defines` for `arch`,
    cached (one build at a time across processes: tests/test_nvcc.py, test_sass.py and this report share them)."""
    flags = ["-cubin", "-std=c++17", "-O3", "-Xptxas", "-v", f"-Dreal={real}",
             *(f"-D{k}={v}" for k, v in sorted((defines or {}).items())), f"-arch={target(arch)}"]
    key = compiler.cache_key(source.read(family, root), source.headers_digest(), " ".join(flags), _nvcc_version())
    out = compiler.cache_dir() / f"sass-{family}-{real}-{key}.cubin"
    log = out.with_suffix(".log")
    if out.exists() and log.exists():
        return out, log.read_text()
    with compiler.build_lock(out.parent, out.name), tempfile.TemporaryDirectory(prefix="gpublas-sass-") as tmp:
        if out.exists() and log.exists():  # another process built it while this one waited
            return out, log.read_text()
        binary = Path(tmp) / "out.cubin"
        cmd = ["nvcc", *flags, "-I", str(source.src_dir()), str(source.path(family, root)), "-o", str(binary)]
        text = compiler.run_compiler(cmd, what=f"nvcc ({arch})", output=binary,
                                     source_name=str(source.path(family, root)))
        for src, dst, data in ((None, log, text), (binary, out, None)):
            part = dst.with_name(f"{dst.name}.{os.getpid()}.part")
            part.write_text(data) if src is None else part.write_bytes(src.read_bytes())
            os.replace(part, dst)
    return out, text


# -- reading the binary ---------------------------------------------------------------------------
def resources(binary, arch):
    """{kernel: {'regs', 'stack', 'smem', 'local'}} for `arch` from cuobjdump -res-usage."""
    out = subprocess.run([tool("cuobjdump"), "-res-usage", "-arch", arch, str(binary)], capture_output=True,
                         text=True, check=True).stdout
    return {m[0]: dict(regs=int(m[1]), stack=int(m[2]), smem=int(m[3]), local=int(m[4])) for m in _RES.findall(out)}


def functions(binary, arch):
    """{kernel: [(address, opcode, operands)]} of the SASS for `arch` (e.g. 'sm_90'), without the
    never-executed fillers (`@!PT LDS RZ, [RZ]` beside cp.async)."""
    out = subprocess.run([tool("cuobjdump"), "-sass", "-arch", arch, str(binary)], capture_output=True,
                         text=True, check=True).stdout
    funcs = {}
    parts = _FUNC.split(out)
    for name, body in zip(parts[1::2], parts[2::2]):
        funcs[name] = [(int(a, 16), op, rest.strip()) for a, pred, op, rest in _INSTR.findall(body)
                       if pred.strip() != "@!PT"]
    return funcs


def mix(instrs):
    """Counts of the MIX categories in a list of (address, opcode, operands)."""
    c = collections.Counter()
    for _, op, _ in instrs:
        base, wide = op.split(".")[0], ".128" in op
        if base in ("FFMA", "DFMA", "HMMA", "HGMMA", "LDSM", "LD", "LDGSTS", "BAR"):  # LD: generic (no LDS, LDG)
            c[base] += 1
        elif base in ("LDS", "LDG"):
            c[base] += 1
            c[base + ".128"] += wide
    return {k: c[k] for k in MIX}


def main_loop(instrs):
    """The instructions of the largest loop body: from a backward branch's target to the branch."""
    best = []
    for i, (addr, op, rest) in enumerate(instrs):
        m = re.match(r"0x([0-9a-f]+)", rest)
        if op.startswith("BRA") and m and int(m.group(1), 16) <= addr:
            body = [x for x in instrs[:i + 1] if x[0] >= int(m.group(1), 16)]
            if len(body) > len(best):
                best = body
    return best


def _lds_bytes(op):
    if op.startswith("LDSM"):
        return 4 * (4 if op.endswith(".4") else 2 if op.endswith(".2") else 1)
    width = re.search(r"\.(128|64|U8|S8|U16|S16)\b", op)
    return {"128": 16, "64": 8, "U8": 1, "S8": 1, "U16": 2, "S16": 2}[width.group(1)] if width else 4


def _mma_shape(op):
    """(m, n, k) of one HMMA (a warp's): HMMA.1688 is 16x8x8, HMMA.16816 16x8x16, HMMA.884 8x8x4; or of
    one HGMMA (a warpgroup's): HGMMA.64x256x8 is 64x256x8."""
    g = re.match(r"HGMMA\.(\d+)x(\d+)x(\d+)", op)
    if g:
        return tuple(int(x) for x in g.groups())
    d = re.match(r"HMMA\.(\d+)", op)
    d = d.group(1) if d else "1688"
    m, rest = (16, d[2:]) if d.startswith("16") else (int(d[0]), d[1:])
    return m, int(rest[0]), int(rest[1:])


def _mma_volume(op):
    """m*n*k of one HMMA or HGMMA (_mma_shape)."""
    return math.prod(_mma_shape(op))


def loop_figures(body):
    """{'loop_instr', 'loop_fma', 'fma_share', 'flop_per_smem_byte'} of a loop body, per thread. An HGMMA
    is a warpgroup's (128 threads'); the shared memory it reads through descriptors (B, and A unless A
    is in registers: n x k and m x k elements of 4 bytes for TF32, 2 for BF16/F16) counts as read, shared
    among the 128."""
    flops, fma, smem = 0.0, 0, 0
    for _, op, rest in body:
        base = op.split(".")[0]
        if base in ("FFMA", "DFMA"):
            fma += 1
            flops += 2
        elif base == "HMMA":
            fma += 1
            flops += 2.0 * _mma_volume(op) / 32
        elif base == "HGMMA":
            m, n, k = _mma_shape(op)
            fma += 1
            flops += 2.0 * m * n * k / 128
            item = 4 if "TF32" in op else 2
            smem += item * k * (n + (m if rest.count("gdesc") > 1 else 0)) / 128
        elif base in ("LDS", "LDSM"):
            smem += _lds_bytes(op)
    n = len(body)
    return dict(loop_instr=n, loop_fma=fma, fma_share=fma / n if n else 0.0,
                flop_per_smem_byte=flops / smem if smem else 0.0)


def occupancy(regs, smem, threads, arch):
    """Theoretical occupancy (resident warps / max warps) on `arch` for one kernel."""
    max_warps, max_regs, max_smem, max_blocks = LIMITS.get(int(arch[3:]), LIMITS[90])
    warps = -(-threads // 32)
    per_warp = -(-max(regs, 1) * 32 // 256) * 256
    by_regs = (max_regs // per_warp) // warps
    by_smem = max_smem // (smem + 1024) if smem else max_blocks
    blocks = min(by_regs, by_smem, max_warps // warps, max_blocks)
    return blocks * warps / max_warps


def block_sizes(family, root=None):
    """{kernel: threads} for the kernels of a family that name a block size in __launch_bounds__."""
    text = source.expand_object_macros(source.strip_comments(source.read(family, root)))
    return {name: int(t) for t, name in _BOUNDS.findall(text)}


def family_rows(family, real, arch, root=None):
    """One row per kernel of <root>/<family>.cu compiled with `real` for `arch`."""
    binary, _ = build(family, real, arch, root)
    res = resources(binary, arch)
    threads = block_sizes(family, root)
    rows = []
    for name, instrs in sorted(functions(binary, arch).items()):
        r = res.get(name, dict(regs=0, stack=0, smem=0, local=0))
        t = threads.get(name, 256)
        row = dict(family=family, kernel=name, real=real, regs=r["regs"], spill_bytes=r["local"],
                   stack=r["stack"], smem=r["smem"], threads=t, occupancy=occupancy(r["regs"], r["smem"], t, arch),
                   instructions=len(instrs), **mix(instrs), **loop_figures(main_loop(instrs)))
        rows.append(row)
    return rows


# -- the suite ------------------------------------------------------------------------------------
# families built for other element types than float/double: the 16-bit GEMMs and attention (head dim 64); the complex instantiations
# of the routines cuBLAS has in C and Z with kernels of their own (complex GEMM runs complex_parts.cu and
# the real GEMM kernels in float / double, listed as they are)
REALS = {"gemm_half": ("__nv_bfloat16", "__half"), "attention_half": ("__nv_bfloat16", "__half"), "triangular": ("float", "double", "cfloat", "cdouble"),
         "getrf": ("float", "double", "cfloat", "cdouble")}
COMPLEX_GEMM = ("complex_parts",)  # the family of complex GEMM's passes (gpublas/blas/gemm_complex.py)
COLUMNS = [("kernel", "kernel", "s"), ("real", "real", "s"), ("regs", "regs", "d"), ("spill_bytes", "spill B", "d"),
           ("smem", "smem B", "d"), ("threads", "threads", "d"), ("occupancy", "occ", ".0%"),
           ("FFMA", "FFMA", "d"), ("DFMA", "DFMA", "d"), ("HMMA", "HMMA", "d"), ("HGMMA", "HGMMA", "d"), ("LDS", "LDS", "d"),
           ("LDS.128", "LDS.128", "d"), ("LDSM", "LDSM", "d"), ("LD", "LD", "d"), ("LDG", "LDG", "d"), ("LDG.128", "LDG.128", "d"), ("LDGSTS", "LDGSTS", "d"),
           ("BAR", "BAR", "d"), ("loop_instr", "loop", "d"), ("loop_fma", "loop FMA", "d"),
           ("fma_share", "FMA share", ".0%"), ("flop_per_smem_byte", "FLOP/smem B", ".2f")]


def instantiations(quick=False):
    """[(root, family, real)] the report covers: every family of cuda_src/ and nn/cuda/ in float and double
    (REALS: other element types); quick: the families complex GEMM runs (gemm, gemm_v2 and its passes,
    complex_parts) in float, the tests' smoke run of the whole report (tests/test_sass.py reads the TF32,
    wgmma and 16-bit GEMMs' SASS itself)."""
    from nn.kernels import KERNELS as NN_KERNELS
    families = [(None, f) for f in source.families()] + [(NN_KERNELS, f) for f in source.families(NN_KERNELS)]
    if quick:
        families = [(root, f) for root, f in families if f in ("gemm", "gemm_v2") or f in COMPLEX_GEMM]
    reals = (lambda f: REALS.get(f, ("float",))[:1]) if quick else (lambda f: REALS.get(f, ("float", "double")))
    return [(root, f, real) for root, f in families for real in reals(f)]


def run(ctx):
    report = Report("sass", ctx)
    arch = ctx.arch or "sm_90"
    why = missing()
    if why:
        report.skip("SASS report", why)
        report.note(f"no report: {why}")
        return report
    for root, family, real in instantiations(ctx.quick):
        for row in family_rows(family, real, arch, root):
            report.add(**row)
    spilling = [f"{r['kernel']} ({r['real']})" for r in report.rows if r["spill_bytes"]]
    report.checks.append({"name": "no kernel spills registers", "passed": not spilling, "detail": spilling})
    report.columns = COLUMNS
    report.note(f"{arch}; FMA share and FLOP/smem B are the largest loop body's (the main loop of a GEMM), per "
                "thread; occupancy assumes the block size in __launch_bounds__, else 256 threads")
    report.note("complex GEMM (gemm_complex.py) runs complex_split / complex_combine and the real GEMM kernels of "
                "gemm.cu / gemm_v2.cu in float (complex64) or double (complex128)")
    if ctx.quick:
        report.note("--quick: complex GEMM's families only (gemm, gemm_v2, complex_parts), in float")
    return report


def draw(plt, report):
    """The main loop's FMA (HMMA) share and the registers of each float (and bfloat16) GEMM kernel."""
    rows = [r for r in report.rows if r["real"] in ("float", "__nv_bfloat16") and r["loop_fma"]] or report.rows
    fig, axes = plt.subplots(1, 2, figsize=(11, 0.22 * len(rows) + 1.5), sharey=True)
    names = [r["kernel"] for r in rows]
    axes[0].barh(names, [100 * r["fma_share"] for r in rows])
    axes[0].set_xlabel("FFMA / HMMA share of the largest loop body (%)")
    axes[1].barh(names, [r["regs"] for r in rows])
    axes[1].set_xlabel("registers per thread")
    for ax in axes:
        ax.grid(True, axis="x", alpha=0.3)
        ax.tick_params(axis="y", labelsize=6)
    axes[0].invert_yaxis()
    return fig
