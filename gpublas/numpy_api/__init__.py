"""gpublas' top floor: NumPy's functions on DeviceArrays, built from the floors below. What the operators
call (ops, bitwise), shape and order (manipulation, rearrange), value tests (predicates), cumulative sums and
products, order statistics and sorting, contractions (einsum, tensordot), `gpublas.linalg`, and
numpy_dispatch, through which np.sum(a), np.exp(a) and friends run on the device.
"""
