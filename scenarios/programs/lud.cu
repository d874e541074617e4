// targets: sm_70
//
// Blocked LU decomposition (Doolittle, no pivoting) of an n x n row-major matrix, in place:
// afterwards the strict lower triangle holds L (its unit diagonal implied) and the upper
// triangle U, with A = L U. The matrix is cut into B x B tiles; step k (a multiple of B)
//
//   1. factors the diagonal tile (k, k) in place                      lu_diagonal<<<1, B>>>
//   2. solves the tiles right of it for U (L_kk X = A) and the tiles
//      below it for L (X U_kk = A), one tile a block, y picking which  lu_panel<<<(m, 2), B>>>
//   3. subtracts L_ik U_kj from every trailing tile (i, j)             lu_update<<<(m, m), (B, B)>>>
//
// with m = (n - k) / B - 1 trailing tiles a side; the last diagonal tile is factored alone.
// The host program is scenarios/lud.toml. n must be a multiple of B.

#define B 16

// One block of B threads; thread x owns row x of the tile.
__global__ void lu_diagonal(float *a, int n, int k)
{
    __shared__ float t[B][B];
    int x = threadIdx.x;
    for (int r = 0; r < B; r++) {
        t[r][x] = a[(k + r) * n + k + x];
    }
    __syncthreads();
    // Row p is final once step p - 1 is done; rows below it eliminate column p.
    for (int p = 0; p < B - 1; p++) {
        if (x > p) {
            float l = t[x][p] / t[p][p];
            t[x][p] = l;
            for (int c = p + 1; c < B; c++) {
                t[x][c] -= l * t[p][c];
            }
        }
        __syncthreads();
    }
    for (int r = 0; r < B; r++) {
        a[(k + r) * n + k + x] = t[r][x];
    }
}

// Block (i, 0): the U tile i + 1 places right of the diagonal, thread x solving its column x
// by forward substitution with the unit lower L_kk. Block (i, 1): the L tile i + 1 places
// below it, thread x solving its row x against U_kk.
__global__ void lu_panel(float *a, int n, int k)
{
    __shared__ float d[B][B];
    __shared__ float t[B][B];
    int x = threadIdx.x;
    int off = k + B * (blockIdx.x + 1);
    bool right = blockIdx.y == 0;
    int r0 = right ? k : off;
    int c0 = right ? off : k;
    for (int r = 0; r < B; r++) {
        d[r][x] = a[(k + r) * n + k + x];
        t[r][x] = a[(r0 + r) * n + c0 + x];
    }
    __syncthreads();
    if (right) {
        for (int r = 1; r < B; r++) {
            float s = t[r][x];
            for (int p = 0; p < r; p++) {
                s -= d[r][p] * t[p][x];
            }
            t[r][x] = s;
        }
    } else {
        for (int c = 0; c < B; c++) {
            float s = t[x][c];
            for (int p = 0; p < c; p++) {
                s -= t[x][p] * d[p][c];
            }
            t[x][c] = s / d[c][c];
        }
    }
    __syncthreads();
    for (int r = 0; r < B; r++) {
        a[(r0 + r) * n + c0 + x] = t[r][x];
    }
}

// Block (j, i) updates trailing tile (i + 1, j + 1) of step k; thread (x, y) its element (y, x).
__global__ void lu_update(float *a, int n, int k)
{
    __shared__ float l[B][B];
    __shared__ float u[B][B];
    int x = threadIdx.x;
    int y = threadIdx.y;
    int r0 = k + B * (blockIdx.y + 1);
    int c0 = k + B * (blockIdx.x + 1);
    l[y][x] = a[(r0 + y) * n + k + x];
    u[y][x] = a[(k + y) * n + c0 + x];
    __syncthreads();
    float s = 0.0f;
    for (int p = 0; p < B; p++) {
        s += l[y][p] * u[p][x];
    }
    a[(r0 + y) * n + c0 + x] -= s;
}
