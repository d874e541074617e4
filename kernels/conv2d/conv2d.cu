// 5x5 2-D convolution (clamp-to-edge borders) with a large shared-memory input tile.
//
// A 32x8 thread block produces a 96x64 output tile; it first stages the 100x68 input tile
// (output tile plus a 2-pixel halo) in 27,200 bytes of static shared memory, so occupancy is
// limited by shared memory. Each thread then computes 3 columns x 8 rows of outputs from the
// tile. Short thread blocks: one load phase, one barrier, one compute phase.

#define RADIUS 2
#define TAPS (2 * RADIUS + 1)
#define OUT_W 96
#define OUT_H 64
#define IN_W (OUT_W + 2 * RADIUS)
#define IN_H (OUT_H + 2 * RADIUS)
#define BLOCK_X 32
#define BLOCK_Y 8

extern "C" __global__ void conv2d_5x5(const float* __restrict__ in,
                                      const float* __restrict__ weights,
                                      float* __restrict__ out,
                                      int width, int height)
{
    __shared__ float tile[IN_H][IN_W];
    __shared__ float w[TAPS * TAPS];

    int tid = threadIdx.y * BLOCK_X + threadIdx.x;
    int ox0 = blockIdx.x * OUT_W;
    int oy0 = blockIdx.y * OUT_H;

    if (tid < TAPS * TAPS) {
        w[tid] = weights[tid];
    }
    for (int i = tid; i < IN_W * IN_H; i += BLOCK_X * BLOCK_Y) {
        int ty = i / IN_W;
        int tx = i - ty * IN_W;
        int gx = min(max(ox0 + tx - RADIUS, 0), width - 1);
        int gy = min(max(oy0 + ty - RADIUS, 0), height - 1);
        tile[ty][tx] = in[gy * width + gx];
    }
    __syncthreads();

    for (int r = 0; r < OUT_H / BLOCK_Y; ++r) {
        int ly = threadIdx.y + r * BLOCK_Y;
        int gy = oy0 + ly;
#pragma unroll
        for (int c = 0; c < OUT_W / BLOCK_X; ++c) {
            int lx = threadIdx.x + c * BLOCK_X;
            int gx = ox0 + lx;
            float acc = 0.0f;
#pragma unroll
            for (int dy = 0; dy < TAPS; ++dy) {
#pragma unroll
                for (int dx = 0; dx < TAPS; ++dx) {
                    acc += w[dy * TAPS + dx] * tile[ly + dy][lx + dx];
                }
            }
            if (gx < width && gy < height) {
                out[gy * width + gx] = acc;
            }
        }
    }
}
