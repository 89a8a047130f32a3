"""cumath: NumPy's elementwise math functions by NumPy's names (PyCUDA's cumath, CuPy's ufuncs).

    y = gpublas.sin(x);  gpublas.floor(x, out=x);  r = gpublas.arctan2(y, x);  h = gpublas.hypot(x, 3.0)

Each is one opcode of cuda_src/elementwise.cu (EW_SIN ..., BIN_FMOD, BIN_ARCTAN2, BIN_HYPOT) launched
through gpublas.core.elementwise, so operands may be views of any strides, `out=` may alias the input,
and the binary functions broadcast. NaN, infinities and signed zeros follow C's math library, as
NumPy's do. float32 and float64 arrays (float32 calls the single-precision functions); floor, ceil,
trunc, square and sign also take int32 arrays and keep their dtype (NumPy 2's rule); the others compute
an integer or bool array where NumPy's ufunc does (sin(int32): float64; sin(uint8): float16). fmod, arctan2
and hypot promote their operands as NumPy's ufuncs do (gpublas.core.promotion).
"""
from . import elementwise as ew
from ..runtime import source

_EW, _BIN = (source.int_defines("elementwise.cu", p) for p in ("EW_", "BIN_"))
FMOD, ARCTAN2, HYPOT = (_BIN[f"BIN_{n}"] for n in ("FMOD", "ARCTAN2", "HYPOT"))


def _math(name, doc, dtypes=ew.FLOATS):
    """The unary function `name` over opcode EW_<NAME>, for arrays of `dtypes`."""
    f = ew._unary(_EW[f"EW_{name.upper()}"], name, dtypes)
    f.__doc__ = doc
    return f


sin = _math("sin", "Elementwise sine (x in radians).")
cos = _math("cos", "Elementwise cosine (x in radians).")
tan = _math("tan", "Elementwise tangent (x in radians).")
arcsin = _math("arcsin", "Elementwise inverse sine, in [-pi/2, pi/2] (NaN outside [-1, 1]).")
arccos = _math("arccos", "Elementwise inverse cosine, in [0, pi] (NaN outside [-1, 1]).")
arctan = _math("arctan", "Elementwise inverse tangent, in [-pi/2, pi/2].")
sinh = _math("sinh", "Elementwise hyperbolic sine.")
cosh = _math("cosh", "Elementwise hyperbolic cosine.")
floor = _math("floor", "Elementwise largest integer <= x (int32 arrays are returned as they are).", ew.NUMERIC)
ceil = _math("ceil", "Elementwise smallest integer >= x (int32 arrays are returned as they are).", ew.NUMERIC)
trunc = _math("trunc", "Elementwise x rounded towards zero (int32 arrays are returned as they are).", ew.NUMERIC)
log10 = _math("log10", "Elementwise base-10 logarithm (NaN below 0, -inf at 0).")
log2 = _math("log2", "Elementwise base-2 logarithm (NaN below 0, -inf at 0).")
log1p = _math("log1p", "Elementwise log(1 + x), accurate for small x.")
expm1 = _math("expm1", "Elementwise exp(x) - 1, accurate for small x.")
exp2 = _math("exp2", "Elementwise 2**x.")
square = _math("square", "Elementwise x * x.", ew.NUMERIC)
reciprocal = _math("reciprocal", "Elementwise 1 / x (float arrays).")
rint = _math("rint", "Elementwise nearest integer, halves to even (ints: float64, as NumPy's).")
sign = _math("sign", "Elementwise -1, 0 or 1 by the sign of x (0 for -0.0; NaN stays NaN).", ew.NUMERIC)


def fmod(a, b, out=None):
    """The remainder of a / b with a's sign (C's fmod; NumPy's fmod, not `%`), broadcasting; NaN
    where b is 0 or a is infinite."""
    return ew.binary(FMOD, a, b, out, "fmod")


def arctan2(a, b, out=None):
    """Elementwise angle of the point (b, a) in [-pi, pi] (atan2(a, b): a is y), broadcasting."""
    return ew.binary(ARCTAN2, a, b, out, "arctan2")


def hypot(a, b, out=None):
    """Elementwise sqrt(a**2 + b**2) without intermediate overflow, broadcasting; inf if either is
    infinite, even with a NaN beside it."""
    return ew.binary(HYPOT, a, b, out, "hypot")
