// Int8 matrix-vector product, y = A x with int8 inputs and int32 sums: the inner loop of an
// int8-quantized linear layer in inference. Four int8 values are packed in each 32-bit word,
// and __dp4a multiplies and accumulates a word of A and a word of x at once (dp4a.s32.s32).
//
// A is column-major over packed words (k4 words per row, leading dimension m), so consecutive
// threads (rows) read consecutive words: coalesced, and memory-bound like dgemv. Each row also
// mixes its sum into a 32-bit hash with funnel shifts (shf) and the two dp2a halves of its
// first word, so that those instructions are checked bit for bit as well.

extern "C" __global__ void igemv_dp4a(const int* __restrict__ a,
                                      const int* __restrict__ x,
                                      int* __restrict__ y,
                                      unsigned* __restrict__ mix,
                                      int m, int k4)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= m) {
        return;
    }
    int sum = 0;
    for (int j = 0; j < k4; ++j) {
        sum = __dp4a(a[(long long)j * m + r], x[j], sum);
    }
    y[r] = sum;
    int first = a[r];
    int halves = __dp2a_lo(first, x[0], 0) - __dp2a_hi(first, x[0], 0);
    unsigned h = (unsigned)sum;
    h = __funnelshift_l(h, h, 13) ^ __funnelshift_rc(h, (unsigned)halves, 7);
    mix[r] = h;
}
