// Mandelbrot escape-time image computed by persistent thread blocks from an atomic work queue.
//
// A small, fixed grid of blocks loops: thread 0 takes the next work item (a run of blockDim.x
// pixels) with atomicAdd on a global counter, broadcasts it through shared memory, and the block
// renders it; blocks leave when the queue is exhausted. Per-pixel trip counts vary widely, the
// load imbalance that persistent threads are meant to absorb. Arithmetic is 64-bit fixed point
// (Q36.28 in a signed 64-bit integer) so that the CPU reference is bit-exact: 64-bit multiplies,
// arithmetic shifts and compares.

#define FRAC 28

extern "C" __global__ void mandel_persistent(unsigned* __restrict__ iters,
                                             unsigned* __restrict__ next_item,
                                             int width, int height,
                                             long long x_min, long long y_min, long long step,
                                             int max_iter)
{
    __shared__ int item;

    int npixels = width * height;
    int nitems = (npixels + blockDim.x - 1) / blockDim.x;
    const long long four = 4ll << FRAC;

    for (;;) {
        if (threadIdx.x == 0) {
            item = (int)atomicAdd(next_item, 1u);
        }
        __syncthreads();
        int it = item;
        if (it >= nitems) {
            break;
        }
        int p = it * blockDim.x + threadIdx.x;
        if (p < npixels) {
            int px = p % width;
            int py = p / width;
            long long cr = x_min + (long long)px * step;
            long long ci = y_min + (long long)py * step;
            long long zr = 0, zi = 0;
            int k = 0;
            while (k < max_iter) {
                long long zr2 = (zr * zr) >> FRAC;
                long long zi2 = (zi * zi) >> FRAC;
                if (zr2 + zi2 > four) {
                    break;
                }
                long long zri = (zr * zi) >> (FRAC - 1);
                zr = zr2 - zi2 + cr;
                zi = zri + ci;
                ++k;
            }
            iters[p] = (unsigned)k;
        }
        // Everyone has read `item` before thread 0 overwrites it.
        __syncthreads();
    }
}
