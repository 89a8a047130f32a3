// layernorm.cu: layer normalization over the last C elements of x viewed as (rows, C) (nn.LayerNorm).
// `real` is the element type of x, y, dy, dx; weight, bias, the saved mean and rstd and the partial
// gradient rows are acc_real (common.cuh: float for 16-bit data, whose elements are loaded as float and
// rounded once on store: FP32 statistics and parameters, as BatchNorm keeps them).
//
// A row is taken by a "unit" of LN_LANES lanes: a warp on the GPU (lane l walks columns l, l + 32, ...,
// coalesced), one thread on the simulator (which walks every column). A row sum is each lane's partial sum
// (its columns in increasing order) folded by common.cuh's warp_allreduce (a butterfly of __shfl_xor_sync,
// offsets 16, 8, 4, 2, 1; every lane ends with the same bits); the simulator's thread computes the 32 lanes'
// partial sums and the same tree (warp_reduce_serial), so both give the same bits. LN_GPU_FORM builds the
// warp's form on the simulator (for the tests, launched with 32 lanes a row).
//
// layernorm_forward:  units walk rows (grid-stride): mean = sum(x) / C, var = sum((x - mean)^2) / C (two
//                     passes, biased, as torch), rstd = 1 / sqrt(var + eps); y = (x - mean) rstd w + b
//                     (w, b may be null); mean[r], rstd[r] are saved for the backward pass.
// layernorm_backward: G units (the launcher picks G <= rows; units past G idle); unit g takes rows g, g + G, ...:
//                     xhat = (x - mean) rstd, g_c = dy_c w_c,
//                     dx = rstd (g - sum(g) / C - xhat sum(g xhat) / C) (two row sums as above), and adds
//                     dy xhat and dy into its own partial rows dw_part[g, :], db_part[g, :] (may be null)
//                     in row order (written at its first row: no zeroing launch, no atomics); the launcher
//                     then sums the G partial rows with gpublas' reduce.cu (a fixed order): the same bits
//                     on every run.
#include "common.cuh"

// lanes_sum(f, C, lane): the sum of f(c) over the row's columns as 32 lanes give it: lane l adds f(l), f(l + 32),
// ... in order, then the butterfly. Called by this name in both forms: the simulator's front end reads the branch
// of the build (a warp's shuffles need its fibers; one thread's loop takes the fast path).
#if defined(__CUDA_ARCH_SIM__) && !defined(LN_GPU_FORM)
#define LN_LANES 1  // lanes per row unit (the launcher, nn/kernels/layernorm.py, asks the backend instead)
// one thread: every lane's partial sum, then the tree lane 0 of the butterfly computes
template <class F>
__device__ __forceinline__ acc_real lanes_sum(F f, int C, int) {
    acc_real p[32];
    for (int l = 0; l < 32; ++l) p[l] = 0;
    int c0 = 0;
    for (; c0 + 32 <= C; c0 += 32)  // whole rounds of 32 apart from the cut one: g++ vectorizes these
        for (int l = 0; l < 32; ++l) p[l] += f(c0 + l);
    for (int l = 0; c0 + l < C; ++l) p[l] += f(c0 + l);
    return warp_reduce_serial(p, 32, SumOp<acc_real>());
}
#else
#define LN_LANES 32
template <class F>
__device__ __forceinline__ acc_real lanes_sum(F f, int C, int lane) {
    acc_real s = 0;
    for (int c = lane; c < C; c += 32) s += f(c);
    return warp_allreduce(s, SumOp<acc_real>());
}
#endif

extern "C" __global__ void layernorm_forward(const real* __restrict__ x, const acc_real* __restrict__ w,
                                             const acc_real* __restrict__ b, real* __restrict__ y,
                                             acc_real* __restrict__ mean, acc_real* __restrict__ rstd, int rows,
                                             int C, compute_t<real> eps) {
    const long long gid = blockIdx.x * (long long)blockDim.x + threadIdx.x;
    const long long units = (long long)gridDim.x * blockDim.x / LN_LANES;
    const int lane = (int)(gid % LN_LANES);
    for (long long r = gid / LN_LANES; r < rows; r += units) {  // the same r in every lane of a unit
        const real* xr = x + r * C;
        real* yr = y + r * C;
        const acc_real mu = lanes_sum([&](int c) { return load_as(xr[c]); }, C, lane) / (acc_real)C;
        const acc_real var = lanes_sum([&](int c) {
            const acc_real d = load_as(xr[c]) - mu;
            return d * d;
        }, C, lane) / (acc_real)C;
        const acc_real rs = (acc_real)1 / sqrt(var + eps);
        for (int c = lane; c < C; c += LN_LANES) {
            acc_real v = (load_as(xr[c]) - mu) * rs;
            if (w) v *= w[c];
            if (b) v += b[c];
            yr[c] = convert<real>(v);
        }
        if (lane == 0) {
            mean[r] = mu;
            rstd[r] = rs;
        }
    }
}

extern "C" __global__ void layernorm_backward(const real* __restrict__ x, const real* __restrict__ dy,
                                              const acc_real* __restrict__ w, const acc_real* __restrict__ mean,
                                              const acc_real* __restrict__ rstd, real* __restrict__ dx,
                                              acc_real* __restrict__ dw_part, acc_real* __restrict__ db_part,
                                              int rows, int C, int G) {
    const long long gid = blockIdx.x * (long long)blockDim.x + threadIdx.x, g = gid / LN_LANES;
    const int lane = (int)(gid % LN_LANES);
    if (g >= G) return;  // a whole unit (warp) leaves together
    acc_real* dwg = dw_part ? dw_part + g * C : nullptr;
    acc_real* dbg = db_part ? db_part + g * C : nullptr;
    for (long long r = g; r < rows; r += G) {
        const real *xr = x + r * C, *dyr = dy + r * C;
        real* dxr = dx + r * C;
        const acc_real mu = mean[r], rs = rstd[r];
        // y = xhat w + b, xhat = (x - mean) rstd  =>  with g = dy w:
        // dL/dx = rstd (g - mean(g) - xhat mean(g xhat))
        const acc_real gm = lanes_sum([&](int c) { return load_as(dyr[c]) * (w ? w[c] : (acc_real)1); }, C,
                                         lane) / (acc_real)C;
        const acc_real gxm = lanes_sum([&](int c) {
            return load_as(dyr[c]) * (w ? w[c] : (acc_real)1) * ((load_as(xr[c]) - mu) * rs);
        }, C, lane) / (acc_real)C;
        const bool first = r == g;
        for (int c = lane; c < C; c += LN_LANES) {
            const acc_real d = load_as(dyr[c]), xhat = (load_as(xr[c]) - mu) * rs;
            dxr[c] = convert<real>((d * (w ? w[c] : (acc_real)1) - gm - xhat * gxm) * rs);
            // dL/dw = sum over rows of dy xhat, dL/db = sum of dy: this unit's rows
            if (dwg) dwg[c] = (first ? (acc_real)0 : dwg[c]) + d * xhat;
            if (dbg) dbg[c] = (first ? (acc_real)0 : dbg[c]) + d;
        }
    }
}
