"""gpublas' lowest floor: the runtime. Errors, environment variables (config), the dtype table, finding and
compiling kernel sources (source, compiler, compile_queue, cubins), device memory (pool, pinned), streams,
events and graphs, the profiler, device-side checks, and launch (prepared kernels, grid geometry). Its
`backends/` is the narrow interface (allocate, copy, memset, stream, event, compile, launch) with its two
implementations, cuda (PyCUDA) and sim (host C++ against the simulator's headers in `sim/`). It imports
nothing of gpublas above it.
"""
