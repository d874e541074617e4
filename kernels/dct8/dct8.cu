// 2-D 8x8 forward DCT-II (orthonormal), as in JPEG encoding: Y = C * X * C^T per block.
//
// One thread transforms one whole 8x8 block held entirely in registers: the 64 inputs, the
// row-pass results and the coefficients (folded to immediates) are all live at once, so the
// kernel is limited by registers rather than by threads or shared memory. 1-D thread blocks of
// 64 threads; block b of a (width/8) x (height/8) grid of blocks starts at pixel
// (8*(b % bw), 8*(b / bw)). Width and height are multiples of 8.

extern "C" __global__ void dct8x8(const float* __restrict__ in, float* __restrict__ out,
                                  int width, int height)
{
    // C[u][x] = a(u) * cos((2x+1) u pi / 16), a(0) = sqrt(1/8), a(u>0) = 1/2.
    const float C[8][8] = {
        {3.535533906e-01f, 3.535533906e-01f, 3.535533906e-01f, 3.535533906e-01f, 3.535533906e-01f, 3.535533906e-01f, 3.535533906e-01f, 3.535533906e-01f},
        {4.903926402e-01f, 4.157348062e-01f, 2.777851165e-01f, 9.754516101e-02f, -9.754516101e-02f, -2.777851165e-01f, -4.157348062e-01f, -4.903926402e-01f},
        {4.619397663e-01f, 1.913417162e-01f, -1.913417162e-01f, -4.619397663e-01f, -4.619397663e-01f, -1.913417162e-01f, 1.913417162e-01f, 4.619397663e-01f},
        {4.157348062e-01f, -9.754516101e-02f, -4.903926402e-01f, -2.777851165e-01f, 2.777851165e-01f, 4.903926402e-01f, 9.754516101e-02f, -4.157348062e-01f},
        {3.535533906e-01f, -3.535533906e-01f, -3.535533906e-01f, 3.535533906e-01f, 3.535533906e-01f, -3.535533906e-01f, -3.535533906e-01f, 3.535533906e-01f},
        {2.777851165e-01f, -4.903926402e-01f, 9.754516101e-02f, 4.157348062e-01f, -4.157348062e-01f, -9.754516101e-02f, 4.903926402e-01f, -2.777851165e-01f},
        {1.913417162e-01f, -4.619397663e-01f, 4.619397663e-01f, -1.913417162e-01f, -1.913417162e-01f, 4.619397663e-01f, -4.619397663e-01f, 1.913417162e-01f},
        {9.754516101e-02f, -2.777851165e-01f, 4.157348062e-01f, -4.903926402e-01f, 4.903926402e-01f, -4.157348062e-01f, 2.777851165e-01f, -9.754516101e-02f},
    };

    int blocks_x = width / 8;
    int nblocks = blocks_x * (height / 8);
    int b = blockIdx.x * blockDim.x + threadIdx.x;
    if (b >= nblocks) {
        return;
    }
    int x0 = (b % blocks_x) * 8;
    int y0 = (b / blocks_x) * 8;
    const float* src = in + y0 * width + x0;
    float* dst = out + y0 * width + x0;

    float v[8][8];
#pragma unroll
    for (int r = 0; r < 8; ++r) {
#pragma unroll
        for (int x = 0; x < 8; ++x) {
            v[r][x] = src[r * width + x];
        }
    }

    // Row pass: v[r][*] <- C * v[r][*].
#pragma unroll
    for (int r = 0; r < 8; ++r) {
        float t[8];
#pragma unroll
        for (int u = 0; u < 8; ++u) {
            float s = 0.0f;
#pragma unroll
            for (int x = 0; x < 8; ++x) {
                s += C[u][x] * v[r][x];
            }
            t[u] = s;
        }
#pragma unroll
        for (int u = 0; u < 8; ++u) {
            v[r][u] = t[u];
        }
    }

    // Column pass: out[w][u] = sum_r C[w][r] * v[r][u].
#pragma unroll
    for (int w = 0; w < 8; ++w) {
#pragma unroll
        for (int u = 0; u < 8; ++u) {
            float s = 0.0f;
#pragma unroll
            for (int r = 0; r < 8; ++r) {
                s += C[w][r] * v[r][u];
            }
            dst[w * width + u] = s;
        }
    }
}
