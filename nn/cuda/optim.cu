// optim.cu: optimizer updates. `real` is the element type. Gradient norms use gpublas' dot (blas1.cu).
//
// sgd_update:   grid-stride loop, one parameter element per thread; PyTorch's SGD in one pass:
//                 g = grad + weight_decay * p
//                 buf = first ? g : momentum * buf + (1 - dampening) * g      (only if momentum != 0)
//                 g = nesterov ? g + momentum * buf : buf                      (only if momentum != 0)
//                 p -= lr * g
//               buf may be null when momentum == 0.
// scale_inplace: grid-stride loop, one element per thread: x[i] *= s.
#include "common.cuh"

extern "C" __global__ void sgd_update(real* __restrict__ p, const real* __restrict__ grad, real* __restrict__ buf,
                                      long long n, real lr, real momentum, real dampening, real weight_decay,
                                      int nesterov, int first) {
    GRID_STRIDE_LOOP(long long, i, n) {
        real g = grad[i] + weight_decay * p[i];
        if (momentum != (real)0) {
            real b = first ? g : momentum * buf[i] + ((real)1 - dampening) * g;
            buf[i] = b;
            g = nesterov ? g + momentum * b : b;
        }
        p[i] -= lr * g;
    }
}

extern "C" __global__ void scale_inplace(real* __restrict__ x, long long n, real s) {
    GRID_STRIDE_LOOP(long long, i, n)
        x[i] *= s;
}
