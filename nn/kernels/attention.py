"""Launchers for nn/cuda/attention.cu (fused scaled dot-product attention, FlashAttention-2's algorithm, float and
double) and nn/cuda/attention_half.cu (the same on the tensor cores, float16 and bfloat16): one function per
kernel that checks its arguments, picks the tiles, computes the grid and launches.

The tiles are data (Tiles and HalfTiles below, per backend and dtype), passed to the compile as defines together
with the head dim padded to a multiple of 16: one build per (dtype, padded head dim). q, k, v, y and dy are
(B, H, T, D) DeviceArrays with any strides over the first three axes and D contiguous (16-byte aligned rows,
so that cp.async moves them); others are copied first.

Dropout on the attention probabilities is a build of its own (ATT_DROPOUT=1): `dropout` below is a Dropout
(p, seed, offset), offset the int64 device scalar the forward and its backward both read (the layer copies its
counter there before advancing it), so that backward regenerates the forward's mask.
"""
from collections import namedtuple

import numpy as np

import gpublas
from gpublas.blas import gemm_plan
from gpublas.runtime import dtypes, launch
from gpublas.runtime.launch import ceil_div, geometry_1d

from .common import KERNELS

HEAD_DIMS = range(16, 129, 8)  # the head dims the kernels take
SIM_SHARED = 227 * 1024        # the simulator's tiles stay under its shared memory per block (sm_90's opt-in)


class Tiles:
    """One configuration of attention.cu: TX x TY threads; forward blocks of FWD_BQ queries streaming FWD_BK
    keys a tile; backward blocks of BWD_BK keys streaming BWD_BQ queries a tile; KT: the d-major copies.
    rows: the simulator's form (cuda_src/attention_sim.cuh, ATT_SIM_ROWS): one thread a block, forward blocks of
    FWD_BQ query rows walking the keys in chunks of FWD_BK, backward one block a head, key chunks of BWD_BK."""

    def __init__(self, tx, ty, fwd_bq, fwd_bk, bwd_bk, bwd_bq, kt, rows=False):
        self.tx, self.ty, self.kt, self.rows = tx, ty, kt, rows
        self.fwd_bq, self.fwd_bk, self.bwd_bk, self.bwd_bq = fwd_bq, fwd_bk, bwd_bk, bwd_bq

    @property
    def threads(self):
        return self.tx * self.ty

    def defines(self, dp):
        return dict(ATT_DP=dp, ATT_THREADS=self.threads, ATT_TX=self.tx, ATT_TY=self.ty, ATT_FWD_BQ=self.fwd_bq, ATT_FWD_BK=self.fwd_bk,
                    ATT_BWD_BK=self.bwd_bk, ATT_BWD_BQ=self.bwd_bq, ATT_KT=int(self.kt), **({"ATT_SIM_ROWS": 1} if self.rows else {}))

    def bwd_blocks(self, Tk):
        """The backward grid's blocks per head: one a key block, or the simulator form's one."""
        return 1 if self.rows else ceil_div(Tk, self.bwd_bk)

    def fwd_shared(self, dp, size):
        """Bytes of attention_forward's shared memory (its layout comment): Qs, 2 stages of Ks and Vs, Ps, Rs;
        the simulator form's: a key chunk's k d-major and v row-major, the rows' accumulators, running max and sum."""
        if self.rows:
            return size * (2 * dp * self.fwd_bk + self.fwd_bq * (dp + 2))
        vw = 16 // size
        pitch, bq, bk = dp + vw, self.fwd_bq, self.fwd_bk
        ke = dp * bk if self.kt else bk * pitch
        return size * (bq * pitch + 2 * ke + 2 * bk * pitch + bq * (bk + vw) + bq * self.tx)

    def bwd_shared(self, dp, size):
        """Bytes of attention_backward's shared memory: Ks, Vs, 2 stages of Qs and Gs (and QTs, GTs), Ps, Ss; the
        simulator form's: a key chunk's k and v d-major, its k row-major and its dk, dv accumulators."""
        if self.rows:
            return size * 5 * dp * self.bwd_bk
        vw = 16 // size
        pitch, bq, bk = dp + vw, self.bwd_bq, self.bwd_bk
        te = dp * bq if self.kt else 0
        return size * (2 * bk * pitch + 4 * bq * pitch + 4 * te + 2 * bk * (bq + vw))


class HalfTiles:
    """One configuration of attention_half.cu: WARPS warps of 16 queries (forward: blocks of 16 WARPS queries
    streaming FWD_BK keys a tile) or 16 keys (backward: blocks of 16 WARPS keys streaming BWD_BQ queries)."""

    def __init__(self, warps, fwd_bk, bwd_bq):
        self.warps, self.fwd_bk, self.bwd_bq = warps, fwd_bk, bwd_bq
        self.fwd_bq = self.bwd_bk = 16 * warps

    @property
    def threads(self):
        return 32 * self.warps

    def bwd_blocks(self, Tk):
        return ceil_div(Tk, self.bwd_bk)

    def defines(self, dp):
        return dict(ATT_DP=dp, ATT_WARPS=self.warps, ATT_THREADS=self.threads, ATT_FWD_BK=self.fwd_bk,
                    ATT_BWD_BQ=self.bwd_bq)

    def fwd_shared(self, dp, size=2):
        """Bytes of attention_half_forward's shared memory: Qs, 2 stages of Ks and Vs (rows of dp + 8)."""
        return size * (dp + 8) * (self.fwd_bq + 4 * self.fwd_bk)

    def bwd_shared(self, dp, size=2):
        """Bytes of attention_half_backward's shared memory: Ks, Vs, 2 stages of Qs and Gs, Ss (dS^T)."""
        return size * ((dp + 8) * (2 * self.bwd_bk + 4 * self.bwd_bq) + self.bwd_bk * (self.bwd_bq + 8))


def half_tiles(dp):
    """4 warps (64 queries a forward block, 64 keys a backward block), K/V tiles of 64 keys, query tiles of 64
    (32 past D = 64: the dk and dv accumulators take 2 dp / 8 registers a lane); the simulator runs the same."""
    return HalfTiles(4, 64, 64 if dp <= 64 else 32)


class Dropout(namedtuple("Dropout", "p seed offset")):
    """Attention dropout: probability p in (0, 1), a 63-bit seed and the int64 device scalar holding the draw's
    counter offset (dropout_rng.cuh: element (bh, i, j) draws at offset + (bh Tq + i) Tk + j)."""

    def args(self, dtype):
        """The kernels' drop_p, drop_scale, drop_seed, drop_offset."""
        if self.offset.dtype != np.int64 or self.offset.size != 1:
            raise ValueError(f"attention dropout: offset must be one int64 element, got {self.offset.dtype} "
                             f"{self.offset.shape}")
        return (np.float32(self.p), dtypes.TABLE[dtype].compute.type(1.0 / (1.0 - self.p)), np.int64(self.seed),
                self.offset)


def _dropout_args(dropout, dtype):
    """The kernels' dropout arguments; without dropout, p = 0 and a null offset the kernels never read."""
    return dropout.args(dtype) if dropout else (np.float32(0.0), dtypes.TABLE[dtype].compute.type(1.0), np.int64(0), None)


class NoTensorCoresError(RuntimeError):
    """16-bit attention asked of a GPU without mma.m16n8k16 (compute capability below 8.0)."""


def require_tensor_cores(dtype, what="attention"):
    where, cc = gemm_plan.target()
    if where != "sim" and cc < 80:
        raise NoTensorCoresError(f"{what}: {np.dtype(dtype)} attention runs on the tensor cores (mma.sync m16n8k16, "
                                 f"compute capability 8.0 or newer); this device has {cc // 10}.{cc % 10}: use "
                                 "float32")


def tiles(dtype, dp):
    """The Tiles for `dtype` and padded head dim dp on the current backend (the simulator's, or the GPU's)."""
    return sim_tiles(dtype, dp) if launch.simulated() else gpu_tiles(dtype, dp)


def gpu_tiles(dtype, dp):
    """128 threads (8 x 16), tiles that keep the accumulators in registers (float: 64 queries forward, double
    half as many) and shared memory under 120 KB (sm_80's opt-in limit is 163 KB). The tests run them on the
    simulator too."""
    if np.dtype(dtype).itemsize == 8:
        return Tiles(16, 8, 32, 32 if dp <= 64 else 16, 32 if dp <= 64 else 16, 16, False)
    return Tiles(16, 8, 64, 64 if dp <= 64 else 32, 64 if dp <= 64 else 32, 32, False)


def sim_tiles(dtype, dp):
    """The simulator's form (Tiles.rows: cuda_src/attention_sim.cuh, one thread a block whose loops g++
    vectorizes): forward blocks of 64 query rows, keys in chunks of 64 (multiples of 16, the vector
    exponentials' runs), the backward's 32 where 64 would not fit the shared memory (double at D > 64). The
    tiled kernels with TX = 1 (8 fissioned threads of whole rows), the form before it, are sim_tiled_tiles."""
    bwd = next(kc for kc in (64, 32, 16) if Tiles(1, 1, 64, 64, kc, 16, True, rows=True).bwd_shared(
        dp, np.dtype(dtype).itemsize) <= SIM_SHARED)
    return Tiles(1, 1, 64, 64, bwd, 16, True, rows=True)


def sim_tiled_tiles(dtype, dp):
    """The tiled kernels as the simulator ran them before its own form: 8 threads of whole rows (TX = 1) and the
    first tiles of the lists below that fit its shared memory (issue 30's note); kept under test."""
    size = np.dtype(dtype).itemsize
    fwd = next(t for t in ((64, 32), (32, 32), (32, 16), (16, 16))
               if Tiles(1, 8, *t, 16, 16, True).fwd_shared(dp, size) <= SIM_SHARED)
    bwd = next(t for t in ((64, 64), (64, 32), (32, 32), (32, 16), (16, 16))
               if Tiles(1, 8, 16, 16, *t, True).bwd_shared(dp, size) <= SIM_SHARED)
    return Tiles(1, 8, *fwd, *bwd, True)


def _fused_build(dtype, dp, dropout=False):
    """(family, defines, tiles) of the fused kernels for dtype at padded head dim dp: attention.cu's, or for 16-bit
    data attention_half.cu's; with dropout, the ATT_DROPOUT build."""
    half = dtype in dtypes.HALVES
    t = half_tiles(dp) if half else tiles(dtype, dp)
    return "attention_half" if half else "attention", {**t.defines(dp), **({"ATT_DROPOUT": 1} if dropout else {})}, t


def _prep_build(dtype, dp, dropout=False):
    """(family, defines) of the backward's pre-pass: it reads no tile, so 16-bit data (whose tiles are
    attention_half.cu's) builds attention.cu with none; float and double share the fused kernels' build."""
    return ("attention", {}) if dtype in dtypes.HALVES else _fused_build(dtype, dp, dropout)[:2]


def builds(dtype, D, dropout=False):
    """[(family, defines)] of the modules the fused attention of dtype at head dim D compiles (forward, pre-pass,
    backward), as the launchers below ask for them: what nn.prefetch compiles ahead (MultiheadAttention)."""
    dp = padded(D)
    fused, prep = _fused_build(dtype, dp, dropout)[:2], _prep_build(dtype, dp, dropout)
    return [fused] + [prep] * (prep != fused)


def _fused(direction, dtype, dp, dropout=False):
    """(kernel, rows a block keeps, threads, shared bytes, tiles) of the fused 'forward' or 'backward' kernel for
    dtype (_fused_build). Its blocks are heavy (a block's rows against every key or query tile): the simulator spreads
    even a grid of few threads over its cores (Kernel.spread_blocks)."""
    if dtype in dtypes.HALVES:
        require_tensor_cores(dtype)
    family, defines, t = _fused_build(dtype, dp, dropout)
    kern = launch.get_kernel(family, f"{family}_{direction}", dtype, root=KERNELS, **defines)
    size = np.dtype(dtype).itemsize
    rows, shared = (t.fwd_bq, t.fwd_shared(dp, size)) if direction == "forward" else (t.bwd_bk, t.bwd_shared(dp, size))
    kern.allow_shared(shared).spread_blocks()
    return kern, rows, t.threads, shared, t


def check_head_dim(D, what="attention"):
    if D not in HEAD_DIMS:
        raise ValueError(f"{what}: head dim {D} is not supported; the fused kernels take 16 to 128 in steps of 8")


def padded(D):
    return ceil_div(D, 16) * 16


def bhtd(x, name):
    """x as a (B, H, T, D) operand the kernels read: D contiguous and 16-byte aligned rows (else a copy); its
    element strides over b, h, t."""
    if x.ndim != 4:
        raise ValueError(f"attention: {name} must be 4-D (B, H, T, D), got shape {x.shape}")
    size = x.dtype.itemsize
    st = [s // size for s in x.strides]
    if st[3] != 1 or x.ptr % 16 or any(s * size % 16 for s in st[:3]) or any(s < 0 for s in st[:3]):
        x = x.copy()
        st = [s // size for s in x.strides]
    return x, st[:3]


def operands(**named):
    """bhtd of each named array: the arrays (copied where they must be) and their strides, flat."""
    arrays, strides = [], []
    for name, x in named.items():
        x, st = bhtd(x, name)
        arrays.append(x)
        strides += st
    return arrays, strides


def forward(q, k, v, y, lse, scale, causal, dropout=None):
    """y (B, H, Tq, D) = softmax(scale q k^T [causal]) v and lse (B * H * Tq,) the rows' logsumexp, in one
    launch. q (B, H, Tq, D), k and v (B, H, Tk, D) (any b, h, t strides); y likewise. dropout: a Dropout or
    None (lse is the undropped rows' either way)."""
    B, H, Tq, D = q.shape
    Tk = k.shape[2]
    (q, k, v, y_), strides = operands(q=q, k=k, v=v, y=y)
    if y_ is not y:
        raise ValueError(f"attention forward: y must have contiguous 16-byte aligned rows of D, got strides {y.strides}")
    if lse.size != B * H * Tq or lse.dtype != dtypes.TABLE[q.dtype].compute:
        raise ValueError(f"attention forward: lse must be {dtypes.TABLE[q.dtype].compute} of {B * H * Tq} elements")
    if B * H * Tq == 0:
        return y
    kern, bq, threads, shared, _ = _fused("forward", q.dtype, padded(D), bool(dropout))
    kern((ceil_div(Tq, bq), B * H), threads, q, k, v, y, lse, H, Tq, Tk, D, scale, int(causal),
         *_dropout_args(dropout, q.dtype), *strides, shared=shared, views=True)
    return y


def backward(q, k, v, y, dy, lse, dq, dk, dv, scale, causal, dropout=None):
    """dq, dk, dv of attention from the forward's q, k, v, y and lse and the output gradient dy: the pre-pass
    (delta = rowsum(dy y), dq zeroed) and the fused backward. dq is the (B, H, Tq, D) accumulator in the
    compute dtype (float32 for 16-bit data); dk, dv contiguous (B, H, Tk, D) of q's dtype. dropout: the
    forward's Dropout (the same offset: the same mask) or None."""
    B, H, Tq, D = q.shape
    Tk = k.shape[2]
    (q, k, v, y, dy), strides = operands(q=q, k=k, v=v, y=y, dy=dy)
    compute = dtypes.TABLE[q.dtype].compute
    for name, a, dt in (("dq", dq, compute), ("dk", dk, q.dtype), ("dv", dv, q.dtype)):
        if a.dtype != dt or not a.c_contiguous:
            raise ValueError(f"attention backward: {name} must be a contiguous {dt} array, got {a.dtype}")
    dp = padded(D)
    rows = B * H * Tq
    delta = gpublas.empty((rows,), compute)
    if rows:
        family, defines = _prep_build(q.dtype, dp, bool(dropout))
        prep = launch.get_kernel(family, "attention_backward_prep", q.dtype, root=KERNELS, **defines)
        prep(*geometry_1d(rows), dy, y, delta, dq, H, Tq, D, *strides[12:], *strides[9:12], rows, views=True)
    if B * H * Tk == 0:
        return dq, dk, dv
    kern, _, threads, shared, t = _fused("backward", q.dtype, dp, bool(dropout))
    kern((t.bwd_blocks(Tk), B * H), threads, q, k, v, dy, lse, delta, dq, dk, dv, H, Tq, Tk, D, scale,
         int(causal), *_dropout_args(dropout, q.dtype), *strides[:9], *strides[12:], shared=shared, views=True)
    return dq, dk, dv
