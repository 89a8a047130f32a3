// optim.cu: optimizer updates and gradient-norm helpers. `real` is the element type.
//
// sgd_update:   grid-stride loop, one parameter element per thread; PyTorch's SGD in one pass:
//                 g = grad + weight_decay * p
//                 buf = first ? g : momentum * buf + (1 - dampening) * g      (only if momentum != 0)
//                 g = nesterov ? g + momentum * buf : buf                      (only if momentum != 0)
//                 p -= lr * g
//               buf may be null when momentum == 0.
// sumsq_block:  one block of SUMSQ_THREADS (256) threads: strided partial sums of x^2, then a
//               shared-memory tree reduction in a fixed order; out[slot] = total.
// scale_inplace: grid-stride loop, one element per thread: x[i] *= s.
#include "common.cuh"

#define SUMSQ_THREADS 256

extern "C" __global__ void sgd_update(real* __restrict__ p, const real* __restrict__ grad, real* __restrict__ buf,
                                      long long n, real lr, real momentum, real dampening, real weight_decay,
                                      int nesterov, int first) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x) {
        real g = grad[i] + weight_decay * p[i];
        if (momentum != (real)0) {
            real b = first ? g : momentum * buf[i] + ((real)1 - dampening) * g;
            buf[i] = b;
            g = nesterov ? g + momentum * b : b;
        }
        p[i] -= lr * g;
    }
}

extern "C" __global__ void sumsq_block(const real* __restrict__ x, real* __restrict__ out, long long n, int slot) {
    __shared__ real partial[SUMSQ_THREADS];
    real s = 0;
    for (long long i = threadIdx.x; i < n; i += blockDim.x) s += x[i] * x[i];
    partial[threadIdx.x] = s;
    __syncthreads();
    for (int stride = blockDim.x / 2; stride > 0; stride /= 2) {
        if (threadIdx.x < stride) partial[threadIdx.x] += partial[threadIdx.x + stride];
        __syncthreads();
    }
    if (threadIdx.x == 0) out[slot] = partial[0];
}

extern "C" __global__ void scale_inplace(real* __restrict__ x, long long n, real s) {
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n; i += (long long)gridDim.x * blockDim.x)
        x[i] *= s;
}
