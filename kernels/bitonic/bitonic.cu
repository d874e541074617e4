// Bitonic sort of (key, value) pairs in shared memory, one 2048-pair chunk per thread block.
//
// Pairs are ordered by key, then by value (values are unique indices, so the order is total
// and the result deterministic). 256 threads each own 4 compare-exchange slots per stage; the
// 66 stages are separated by barriers, so the barrier sits inside a doubly nested loop. The
// two 8 KiB arrays make it shared-memory heavy; thread blocks are long.

#define CHUNK 2048

extern "C" __global__ void bitonic_sort_chunks(unsigned* __restrict__ keys,
                                               unsigned* __restrict__ values)
{
    __shared__ unsigned sk[CHUNK];
    __shared__ unsigned sv[CHUNK];

    unsigned base = blockIdx.x * CHUNK;
    for (unsigned i = threadIdx.x; i < CHUNK; i += blockDim.x) {
        sk[i] = keys[base + i];
        sv[i] = values[base + i];
    }
    __syncthreads();

    for (unsigned size = 2; size <= CHUNK; size <<= 1) {
        for (unsigned stride = size >> 1; stride > 0; stride >>= 1) {
            for (unsigned t = threadIdx.x; t < CHUNK / 2; t += blockDim.x) {
                unsigned lo = 2 * t - (t & (stride - 1));
                unsigned hi = lo + stride;
                bool ascending = (lo & size) == 0;
                unsigned klo = sk[lo], khi = sk[hi];
                unsigned vlo = sv[lo], vhi = sv[hi];
                bool greater = klo > khi || (klo == khi && vlo > vhi);
                if (greater == ascending) {
                    sk[lo] = khi;
                    sk[hi] = klo;
                    sv[lo] = vhi;
                    sv[hi] = vlo;
                }
            }
            __syncthreads();
        }
    }

    for (unsigned i = threadIdx.x; i < CHUNK; i += blockDim.x) {
        keys[base + i] = sk[i];
        values[base + i] = sv[i];
    }
}
