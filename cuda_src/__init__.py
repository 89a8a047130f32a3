"""gpublas' CUDA C kernels, one family per .cu file; shipped as package data.

They are compiled at run time: by nvcc for the `cuda` backend, by the host C++ compiler against
gpublas/runtime/sim/gpublas_sim.h for the `sim` backend. Every kernel is `extern "C" __global__`; scalar
types that depend on the array dtype are written `real` and defined at compile time
(-Dreal=float, -Dreal=double or -Dreal=int). nn keeps its own kernels in nn/cuda/; they include
headers from here (common.cuh) and go through the same compile path.
"""
