"""gpublas' third floor: cuBLAS's routines on DeviceArrays. Levels 1-3 (blas1, blas2, blas2_tri, blas3,
blas3_tri, blas3_sym), the GEMM planner's table (gemm_plan) and complex GEMM as real ones (gemm_complex),
cuBLAS's extensions (blas_ext: geam, dgmm) and batched LU (lapack). It imports gpublas.core and runtime.
"""
