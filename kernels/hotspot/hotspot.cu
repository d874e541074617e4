// One time step of a HotSpot-like thermal simulation on a 2-D grid (5-point stencil).
//
// new = t + cap * (power + (n + s - 2t) * ry + (e + w - 2t) * rx + (amb - t) * rz), with
// clamp-to-edge borders. A 16x16 thread block stages its 18x18 neighbourhood in shared memory.
// The host iterates the step over time with two ping-pong temperature buffers, so this is a
// sequence of short launches.

#define BS 16
#define HALO (BS + 2)

extern "C" __global__ void hotspot_step(const float* __restrict__ temp_in,
                                        const float* __restrict__ power,
                                        float* __restrict__ temp_out,
                                        int width, int height,
                                        float cap, float rx, float ry, float rz, float amb)
{
    __shared__ float t[HALO][HALO];

    int x0 = blockIdx.x * BS - 1;
    int y0 = blockIdx.y * BS - 1;
    int tid = threadIdx.y * BS + threadIdx.x;
    for (int i = tid; i < HALO * HALO; i += BS * BS) {
        int ly = i / HALO;
        int lx = i - ly * HALO;
        int gx = min(max(x0 + lx, 0), width - 1);
        int gy = min(max(y0 + ly, 0), height - 1);
        t[ly][lx] = temp_in[gy * width + gx];
    }
    __syncthreads();

    int x = blockIdx.x * BS + threadIdx.x;
    int y = blockIdx.y * BS + threadIdx.y;
    if (x >= width || y >= height) {
        return;
    }
    int lx = threadIdx.x + 1;
    int ly = threadIdx.y + 1;
    float c = t[ly][lx];
    float ns = t[ly - 1][lx] + t[ly + 1][lx] - 2.0f * c;
    float ew = t[ly][lx - 1] + t[ly][lx + 1] - 2.0f * c;
    float p = power[y * width + x];
    temp_out[y * width + x] = c + cap * (p + ns * ry + ew * rx + (amb - c) * rz);
}
