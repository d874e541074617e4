// 256-bin histogram with per-block sub-histograms in shared memory.
//
// Each thread block clears a shared histogram, its threads walk the input with a grid-stride
// loop doing shared-memory atomicAdd (contention depends on the data's skew), and finally the
// block merges its bins into the global histogram with global atomicAdd. Integer atomics keep
// the result independent of the order the hardware serialises them in.

#define BINS 256

extern "C" __global__ void histogram256(const unsigned* __restrict__ data, int n,
                                        unsigned* __restrict__ hist)
{
    __shared__ unsigned local[BINS];

    for (int b = threadIdx.x; b < BINS; b += blockDim.x) {
        local[b] = 0;
    }
    __syncthreads();

    int stride = gridDim.x * blockDim.x;
    for (int i = blockIdx.x * blockDim.x + threadIdx.x; i < n; i += stride) {
        unsigned v = data[i];
        // Mix the high bits in so that the bin is not just the low byte.
        unsigned bin = (v ^ (v >> 8) ^ (v >> 16)) & (BINS - 1);
        atomicAdd(&local[bin], 1u);
    }
    __syncthreads();

    for (int b = threadIdx.x; b < BINS; b += blockDim.x) {
        unsigned c = local[b];
        if (c != 0) {
            atomicAdd(&hist[b], c);
        }
    }
}
