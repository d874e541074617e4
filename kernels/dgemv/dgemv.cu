// Double-precision matrix-vector product y = alpha * A x + beta * y (BLAS dgemv, no transpose).
//
// A is column-major (m rows, n columns, leading dimension m), so consecutive threads (rows)
// read consecutive addresses in every column: coalesced. Each thread loops over all n columns:
// long thread blocks of f64 fused multiply-adds, memory-bound on the matrix.

extern "C" __global__ void dgemv_n(const double* __restrict__ a,
                                   const double* __restrict__ x,
                                   double* __restrict__ y,
                                   int m, int n, double alpha, double beta)
{
    int r = blockIdx.x * blockDim.x + threadIdx.x;
    if (r >= m) {
        return;
    }
    double sum = 0.0;
    for (int j = 0; j < n; ++j) {
        sum += a[(long long)j * m + r] * x[j];
    }
    y[r] = alpha * sum + beta * y[r];
}
