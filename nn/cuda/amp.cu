// amp.cu: mixed-precision training's loss-scaling kernel (nn/amp.py's GradScaler). `real` is the
// gradient's element type (float32 master gradients; any float builds).
//
// amp_unscale: grid-stride loop, one element per thread: g[i] *= inv_scale (in float, rounded to
//              `real` once), and *found_inf = 1 when the result is infinite or NaN (every thread that
//              finds one writes the same 1, so the race is benign; the flag is never cleared here).
//              PyTorch's _amp_foreach_non_finite_check_and_unscale_, one launch per gradient buffer.
#include "common.cuh"

extern "C" __global__ void amp_unscale(real* g, long long n, float inv_scale, int* found_inf) {
    GRID_STRIDE_LOOP(long long, i, n) {
        const acc_real v = load_as(g[i]) * (acc_real)inv_scale;
        g[i] = convert<real>(v);
        if (!(v - v == (acc_real)0)) *found_inf = 1;  // inf - inf and NaN - NaN are NaN
    }
}
