// gather.cu: integer-array and boolean-mask indexing, a[idx], a[mask] and their assignments
// (gpublas/core/gather.py). `real` is the indexed array's element type (index_wrap_real: the index
// array's, int or long long). A position list w (long long) says where each selected element sits
// along the indexed axes: element offset w[j] * wstride from the first element of the rest.
//
// index_wrap_real: grid-stride loop, one index per thread: w[j] = idx[j], plus n when negative; an
//                  index outside [-n, n) writes nothing and lowers *bad to j (atomicMin), so the host
//                  names the first bad position, the same one under any thread order.
// index_owner:     grid-stride loop, one position per thread: owner[w[j]] = 1 + the largest j with that
//                  position (atomicMax): the one write put_nd keeps where indices repeat ("last wins").
// mask_offsets:    grid-stride loop, one mask element per thread (the mask contiguous): where m[p] is
//                  set, pos[before[p]] = element p's offset under the strides given (common.cuh
//                  NdLayout<1> over the mask's dims); before[] is the mask's exclusive scan (scan.cu),
//                  so the positions come in C order.
// take_nd_real:    grid-stride loop over the result, one element per thread (NdLayout<3>: operand 0
//                  the source without its indexed axes, 1 the position list, 2 the result):
//                  out[o2] = a[o0 + w[o1] * wstride].
// put_nd_real:     the same walk with the value as operand 0 and the target as 2: a[o2 + w[o1] * wstride]
//                  = v[o0], written only by the position owner[] names when an owner list is given.
#include "common.cuh"

extern "C" __global__ void index_wrap_real(const real* __restrict__ idx, long long m, long long n,
                                           long long* __restrict__ w, unsigned long long* bad) {
    GRID_STRIDE_LOOP(long long, j, m) {
        const long long i = (long long)idx[j], k = i < 0 ? i + n : i;
        if (k < 0 || k >= n)
            atomicMin(bad, (unsigned long long)j);
        else
            w[j] = k;
    }
}

extern "C" __global__ void index_owner(const long long* __restrict__ w, long long m, unsigned long long* owner) {
    GRID_STRIDE_LOOP(long long, j, m)
        atomicMax(&owner[w[j]], (unsigned long long)j + 1);
}

extern "C" __global__ void mask_offsets(const bool* __restrict__ m, const long long* __restrict__ before,
                                        long long n, long long* __restrict__ pos, ND_DIM_PARAMS,
                                        ND_STRIDE_PARAMS(s)) {
    const NdLayout<1> L = {ND_DIMS, {ND_STRIDES(s)}};
    GRID_STRIDE_LOOP(long long, p, n) {
        if (!m[p]) continue;
        long long off[1];
        L.offsets(p, off);
        pos[before[p]] = off[0];
    }
}

extern "C" __global__ void take_nd_real(const real* a, const long long* __restrict__ w, long long wstride,
                                        real* out, long long n, ND_DIM_PARAMS, ND_STRIDE_PARAMS(sa),
                                        ND_STRIDE_PARAMS(sw), ND_STRIDE_PARAMS(so)) {
    const NdLayout<3> L = {ND_DIMS, {ND_STRIDES(sa), ND_STRIDES(sw), ND_STRIDES(so)}};
    L.walk(n, [&](const long long* off) { out[off[2]] = a[off[0] + w[off[1]] * wstride]; });
}

extern "C" __global__ void put_nd_real(const real* v, const long long* __restrict__ w, long long wstride,
                                       const unsigned long long* __restrict__ owner, real* a, long long n,
                                       ND_DIM_PARAMS, ND_STRIDE_PARAMS(sv), ND_STRIDE_PARAMS(sw),
                                       ND_STRIDE_PARAMS(sa)) {
    const NdLayout<3> L = {ND_DIMS, {ND_STRIDES(sv), ND_STRIDES(sw), ND_STRIDES(sa)}};
    L.walk(n, [&](const long long* off) {
        const long long j = off[1];
        if (owner == nullptr || owner[w[j]] == (unsigned long long)j + 1) a[off[2] + w[j] * wstride] = v[off[0]];
    });
}
