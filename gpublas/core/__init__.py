"""gpublas' second floor: the DeviceArray and what it is made of. The array (array, layout, views, indexing,
gather), making arrays (creation, ranges), NumPy's type promotion, the operand checks, elementwise operations
and NumPy's math names (elementwise, cumath), reductions and scans, user kernels (factories) and interop
(DLPack, the CUDA array interface). It imports only gpublas.runtime.
"""
