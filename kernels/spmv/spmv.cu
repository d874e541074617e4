// Sparse matrix-vector product y = A x, A in CSR, one thread per row (scalar CSR).
//
// Row lengths vary, so warps diverge on the loop trip count and the gathers from x are
// irregular: a memory-bound, load-imbalanced kernel. Each row is summed in CSR order, the same
// order as the CPU reference.

extern "C" __global__ void spmv_csr(const int* __restrict__ row_ptr,
                                    const int* __restrict__ col_idx,
                                    const float* __restrict__ vals,
                                    const float* __restrict__ x,
                                    float* __restrict__ y, int rows)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= rows) {
        return;
    }
    float sum = 0.0f;
    int end = row_ptr[r + 1];
    for (int e = row_ptr[r]; e < end; ++e) {
        sum += vals[e] * x[col_idx[e]];
    }
    y[r] = sum;
}
