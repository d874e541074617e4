// Exclusive prefix sum (Blelloch work-efficient scan) of 32-bit unsigned integers.
//
// scan_blocks: each block of T threads scans 2*T elements in dynamic shared memory
// (extern __shared__, 8*T bytes): an up-sweep and a down-sweep, each a loop with a barrier per
// level, and writes its total to block_sums. The host then scans block_sums with one block of
// the same kernel and adds the scanned sums back with scan_add. Integer sums wrap modulo 2^32,
// exactly as the CPU reference does.

extern "C" __global__ void scan_blocks(const unsigned* __restrict__ in,
                                       unsigned* __restrict__ out,
                                       unsigned* __restrict__ block_sums, int n)
{
    extern __shared__ unsigned s[];

    unsigned t = threadIdx.x;
    unsigned m = 2 * blockDim.x;
    unsigned base = blockIdx.x * m;
    unsigned i0 = base + 2 * t;
    s[2 * t] = i0 < (unsigned)n ? in[i0] : 0u;
    s[2 * t + 1] = i0 + 1 < (unsigned)n ? in[i0 + 1] : 0u;

    // Up-sweep: build partial sums in place.
    unsigned offset = 1;
    for (unsigned d = m >> 1; d > 0; d >>= 1) {
        __syncthreads();
        if (t < d) {
            unsigned a = offset * (2 * t + 1) - 1;
            unsigned b = offset * (2 * t + 2) - 1;
            s[b] += s[a];
        }
        offset <<= 1;
    }

    if (t == 0) {
        block_sums[blockIdx.x] = s[m - 1];
        s[m - 1] = 0;
    }

    // Down-sweep: push prefixes back down the tree.
    for (unsigned d = 1; d < m; d <<= 1) {
        offset >>= 1;
        __syncthreads();
        if (t < d) {
            unsigned a = offset * (2 * t + 1) - 1;
            unsigned b = offset * (2 * t + 2) - 1;
            unsigned tmp = s[a];
            s[a] = s[b];
            s[b] += tmp;
        }
    }
    __syncthreads();

    if (i0 < (unsigned)n) {
        out[i0] = s[2 * t];
    }
    if (i0 + 1 < (unsigned)n) {
        out[i0 + 1] = s[2 * t + 1];
    }
}

extern "C" __global__ void scan_add(unsigned* __restrict__ out,
                                    const unsigned* __restrict__ scanned_sums, int n)
{
    unsigned add = scanned_sums[blockIdx.x];
    unsigned i0 = blockIdx.x * 2 * blockDim.x + threadIdx.x;
    if (i0 < (unsigned)n) {
        out[i0] += add;
    }
    if (i0 + blockDim.x < (unsigned)n) {
        out[i0 + blockDim.x] += add;
    }
}
