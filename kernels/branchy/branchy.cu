// Divergent nested loops over integer data, with a per-thread array in local memory.
//
// Each thread runs an outer loop of 1..8 iterations and, inside it, an inner loop of 0..15
// iterations, both counts taken from the data, with a two-level if/else in the body: lanes of a
// warp diverge at every level and reconverge at different points. A per-thread 16-entry tally
// indexed by a data-dependent value cannot live in registers, so it goes to .local memory.
// Everything is 32-bit unsigned arithmetic: exact.

extern "C" __global__ void branchy(const unsigned* __restrict__ data,
                                   unsigned* __restrict__ out, int n)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) {
        return;
    }
    unsigned tally[16];
    for (int k = 0; k < 16; ++k) {
        tally[k] = 0;
    }

    unsigned acc = data[i];
    unsigned outer = (acc & 7u) + 1u;
    for (unsigned j = 0; j < outer; ++j) {
        unsigned y = data[(i + 7u * j + 1u) % (unsigned)n];
        unsigned inner = (y >> 4) & 15u;
        for (unsigned k = 0; k < inner; ++k) {
            if (acc & 1u) {
                if (acc & 2u) {
                    acc = acc * 3u + k;
                } else {
                    acc ^= y << (k & 7u);
                }
            } else {
                acc = (acc >> 1) + j;
                if ((acc & 12u) == 12u) {
                    acc += y;
                }
            }
            tally[acc & 15u] += 1u;
        }
    }

    unsigned h = acc;
    for (int k = 0; k < 16; ++k) {
        h = h * 31u + tally[k];
    }
    out[i] = h;
}
