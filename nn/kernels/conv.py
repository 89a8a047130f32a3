"""Launchers of nn/cuda/conv.cu: im2col, col2im and the GEMM epilogue into NCHW with bias and activation."""
import functools

from gpublas.runtime.launch import flat_geometry
from gpublas.runtime.launch import fast_divisor as fd

from .common import _epilogue, _same, get_kernel


@functools.lru_cache(maxsize=256)  # a model asks the same few geometries every step
def _conv_sizes(N, C, H, W, geom):
    """conv.cu's size arguments: every size it divides by packed as a FastDivmod divisor."""
    kh, kw, sh, sw, ph, pw, dh, dw, OH, OW = geom
    return (*map(fd, (N, C, H, W, kh, kw, sh, sw)), ph, pw, dh, dw, fd(OH), fd(OW))


def im2col(x, cols, geom):
    """cols (C*kh*kw, N*OH*OW) from x (N, C, H, W); geom = (kh, kw, sh, sw, ph, pw, dh, dw, OH, OW)."""
    N, C, H, W = x.shape
    kh, kw, _, _, _, _, _, _, OH, OW = geom
    if cols.shape != (C * kh * kw, N * OH * OW):
        raise ValueError(f"im2col: cols {cols.shape}, expected {(C * kh * kw, N * OH * OW)}")
    get_kernel("conv", "im2col_nchw", _same("im2col", x, cols))(  # a thread item per (c, column)
        *flat_geometry(C * N * OH * OW), x, cols, *_conv_sizes(N, C, H, W, geom), fd(N * OH * OW))
    return cols


def col2im(dcols, dx, geom):
    """dx (N, C, H, W) = the sum of dcols (accumulator dtype) over every tap landing on each pixel (writes dx)."""
    N, C, H, W = dx.shape
    kh, kw, _, _, _, _, _, _, OH, OW = geom
    if dcols.shape != (C * kh * kw, N * OH * OW):
        raise ValueError(f"col2im: dcols {dcols.shape}, expected {(C * kh * kw, N * OH * OW)}")
    get_kernel("conv", "col2im_nchw", _epilogue("col2im", dcols, dx))(
        *flat_geometry(dx.size), dcols, dx, *_conv_sizes(N, C, H, W, geom))
    return dx


def cnp_to_nchw_bias(Y, b, y, act):
    """y (N, C, P...) = act(Y (C, N*P) permuted + b[c]); b may be None; Y in the accumulator dtype."""
    N, C = y.shape[:2]
    P = y.size // max(1, N * C)
    if Y.size != y.size or Y.shape[0] != C:
        raise ValueError(f"cnp_to_nchw_bias: Y {Y.shape} does not fit y {y.shape}")
    get_kernel("conv", "cnp_to_nchw_bias", _epilogue("cnp_to_nchw_bias", Y, y, b))(
        *flat_geometry(y.size), Y, b, y, N, fd(C), fd(P), act)
    return y
