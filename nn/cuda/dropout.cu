// dropout.cu: inverted dropout with the mask drawn on the device by a counter-based generator.
// `real` is the element type (16-bit data is computed in float, acc_real, as is `scale`). Element i of
// a call uses dropout_rng.cuh's draw at counter offset + i (splitmix64 of seed and counter):
// a pure function of (seed, counter), so the mask does not depend on the launch shape or thread order.
// `offset` lives in device memory (one long long per Dropout layer) and dropout_advance moves it on by
// n after each draw, so a replayed graph draws fresh numbers exactly as eager calls do.
//
// dropout_forward:  grid-stride loop, one element per thread: u = top 24 bits of the hash / 2^24 in
//                   [0, 1); keep = u >= p; mask[i] = keep; y[i] = keep ? x[i] * scale : 0 (scale = 1/(1-p)).
// dropout_backward: grid-stride loop, one element per thread: dx[i] = mask[i] ? dy[i] * scale : 0.
// dropout_advance:  one thread: *offset += n (after the draw: a kernel cannot move the counter that its
//                   other threads are still reading).
#include "common.cuh"
#include "dropout_rng.cuh"

extern "C" __global__ void dropout_forward(const real* __restrict__ x, real* __restrict__ y, unsigned char* __restrict__ mask,
                                           long long n, float p, compute_t<real> scale, long long seed,
                                           const long long* __restrict__ counter) {
    const long long offset = *counter;
    GRID_STRIDE_LOOP(long long, i, n) {
        const unsigned char keep = dropout_keep((unsigned long long)seed, (unsigned long long)(offset + i), p);
        mask[i] = keep;
        y[i] = convert<real>(keep ? load_as(x[i]) * scale : (acc_real)0);
    }
}

extern "C" __global__ void dropout_backward(const real* __restrict__ dy, const unsigned char* __restrict__ mask,
                                            real* __restrict__ dx, long long n, compute_t<real> scale) {
    GRID_STRIDE_LOOP(long long, i, n)
        dx[i] = convert<real>(mask[i] ? load_as(dy[i]) * scale : (acc_real)0);
}

extern "C" __global__ void dropout_advance(long long* __restrict__ counter, long long n) {
    if (blockIdx.x == 0 && threadIdx.x == 0) *counter += n;
}
