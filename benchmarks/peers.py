"""The library gpublas is compared with on a GPU machine: CuPy or PyTorch, whichever imports
(GPUBLAS_BENCH_PEER=cupy|torch|none chooses). Both call cuBLAS for GEMM/GEMV; TF32 is switched off
so that FP32 GEMM is compared with FP32 GEMM.

    peer = detect()          # None on the sim backend or when neither imports
    a = peer.array(host); c = peer.gemm(a, b); t = measure(lambda: peer.gemm(a, b), ctx, peer.clock())
"""
import os

import numpy as np

import gpublas

_cached = {}


def detect():
    """The peer for this run, or None (sim backend, or no CuPy/PyTorch, or it fails to start)."""
    if gpublas.backend() != "cuda":
        return None
    if "peer" in _cached:
        return _cached["peer"]
    wanted = gpublas.config.choice("GPUBLAS_BENCH_PEER", ("cupy", "torch", "none"), None)
    order = {"cupy": (CupyPeer,), "torch": (TorchPeer,), "none": ()}.get(wanted, (CupyPeer, TorchPeer))
    peer, why = None, []
    for cls in order:
        try:
            peer = probe(cls())
            break
        except Exception as e:  # not installed, no usable device, or no working cuBLAS
            why.append(f"{cls.library}: {type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}")
    if peer is None and why:
        print("no CuPy/PyTorch to compare with (" + "; ".join(why) + ")")
    _cached["peer"] = peer
    return peer


def probe(peer):
    """Returns `peer` once a tiny product through it is right: a library that imports but has no
    working cuBLAS (a CuPy wheel without its CUDA libraries) fails here, not in the compute suite."""
    a = np.arange(12, dtype=np.float32).reshape(3, 4)
    got = peer.get(peer.gemm(peer.array(a), peer.array(a.T)))
    peer.synchronize()
    if not np.allclose(got, a @ a.T):
        raise RuntimeError(f"{peer.library}'s 3x4 @ 4x3 product is wrong: {got.tolist()}")
    return peer


class TorchPeer:
    library = "torch"

    def __init__(self):
        import torch

        if not torch.cuda.is_available():
            raise RuntimeError("torch sees no CUDA device")
        torch.backends.cuda.matmul.allow_tf32 = False
        torch.backends.cudnn.allow_tf32 = False
        self.torch = torch
        self.device = torch.device("cuda")
        self.name = f"PyTorch {torch.__version__} (cuBLAS)"

    def array(self, host):
        host = np.ascontiguousarray(host)
        if host.dtype.name == "bfloat16":  # ml_dtypes' bfloat16: NumPy cannot hand it to torch, its bits can
            return self.torch.from_numpy(host.view(np.uint16)).to(self.device).view(self.torch.bfloat16)
        return self.torch.from_numpy(host).to(self.device)

    def get(self, x):
        if hasattr(x, "cpu"):
            x = x.detach()
            return (x.float() if x.dtype == self.torch.bfloat16 else x).cpu().numpy()
        return np.asarray(x)

    def synchronize(self):
        self.torch.cuda.synchronize()

    def clock(self):
        torch = self.torch

        class Clock:
            def start(self):
                self.b = torch.cuda.Event(enable_timing=True)
                self.e = torch.cuda.Event(enable_timing=True)
                self.b.record()

            def stop(self):
                self.e.record()
                self.e.synchronize()
                return self.b.elapsed_time(self.e)

        return Clock()

    def set_tf32(self, on):
        """Lets cuBLAS GEMM use TF32 tensor cores (on) or not; True when the switch took."""
        self.torch.backends.cuda.matmul.allow_tf32 = bool(on)
        return True

    def gemm(self, a, b, out=None):
        return self.torch.matmul(a, b, out=out)

    def gemv(self, a, x, out=None):
        return self.torch.mv(a, x, out=out)

    def axpy(self, alpha, x, y):
        return y.add_(x, alpha=alpha)

    def add(self, x, y):
        return x + y

    def sum(self, x):
        return x.sum()

    def dot(self, x, y):
        return self.torch.dot(x, y)

    def trsm(self, a, b):
        return self.torch.linalg.solve_triangular(a, b, upper=False)

    def getrf_batched(self, a):
        return self.torch.linalg.lu_factor(a)[0]

    def fill(self, x, value):
        return x.fill_(value)


class CupyPeer:
    library = "cupy"

    def __init__(self):
        os.environ.setdefault("CUPY_TF32", "0")  # read when CuPy is imported; 0 is also its default
        import cupy

        cupy.cuda.runtime.getDeviceCount()
        self.cp = cupy
        self.name = f"CuPy {cupy.__version__} (cuBLAS)"

    def array(self, host):
        return self.cp.asarray(np.ascontiguousarray(host))

    def get(self, x):
        return self.cp.asnumpy(x)

    def synchronize(self):
        self.cp.cuda.Device().synchronize()

    def clock(self):
        cp = self.cp

        class Clock:
            def start(self):
                self.b, self.e = cp.cuda.Event(), cp.cuda.Event()
                self.b.record()

            def stop(self):
                self.e.record()
                self.e.synchronize()
                return cp.cuda.get_elapsed_time(self.b, self.e)

        return Clock()

    def set_tf32(self, on):
        """Lets cuBLAS GEMM use TF32 tensor cores (on) or not; True when the switch took."""
        try:
            from cupy._core import _routines_linalg as linalg
            linalg.set_compute_type(np.float32, linalg.COMPUTE_TYPE_TF32 if on else linalg.COMPUTE_TYPE_DEFAULT)
            return True
        except (ImportError, AttributeError):  # a CuPy without the switch: FP32 only
            return not on

    def gemm(self, a, b, out=None):
        return self.cp.matmul(a, b, out=out)

    def gemv(self, a, x, out=None):
        return self.cp.matmul(a, x, out=out)

    def axpy(self, alpha, x, y):
        y += alpha * x  # CuPy fuses nothing here without cupy.fuse: this is its idiomatic form
        return y

    def add(self, x, y):
        return x + y

    def sum(self, x):
        return x.sum()

    def dot(self, x, y):
        return self.cp.dot(x, y)

    def trsm(self, a, b):
        from cupyx.scipy.linalg import solve_triangular
        return solve_triangular(a, b, lower=True)

    def getrf_batched(self, a):
        raise NotImplementedError("CuPy has no batched LU in its public API (cupyx.scipy.linalg.lu_factor "
                                  "takes one matrix)")

    def fill(self, x, value):
        x.fill(value)
        return x
