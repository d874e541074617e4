// targets: sm_70
//
// Needleman-Wunsch global alignment scores of two sequences of n symbols (0..3), as a
// wavefront over tiles. score is the (n + 1) x (n + 1) row-major matrix
//
//   score[i][0] = -i * penalty,  score[0][j] = -j * penalty,
//   score[i][j] = max(score[i-1][j-1] + sub[a[i-1]][b[j-1]],
//                     score[i-1][j] - penalty, score[i][j-1] - penalty),
//
// with sub a 4 x 4 substitution table. nw_borders writes the first row and column; the
// inner n x n cells are cut into B x B tiles, and launch d of nw_diagonal computes the
// tiles (ti, tj) with ti + tj = d, which need only tiles of earlier diagonals: there are
// min(d + 1, 2 nt - 1 - d) of them, nt = n / B. Within a tile the B threads sweep its own
// anti-diagonals, thread x owning row x. The host program is scenarios/nw.toml. n must be
// a multiple of B.

#define B 16

__global__ void nw_borders(int *score, int n, int penalty)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i <= n) {
        score[i * (n + 1)] = -i * penalty;
        score[i] = -i * penalty;
    }
}

__global__ void nw_diagonal(int *score, const int *a, const int *b, const int *sub,
                            int n, int d, int penalty)
{
    __shared__ int t[B + 1][B + 1];
    __shared__ int s[B][B];
    int nt = n / B;
    int ti = max(0, d - nt + 1) + blockIdx.x;
    int tj = d - ti;
    int x = threadIdx.x;
    int w = n + 1;
    int r0 = ti * B;
    int c0 = tj * B;
    // The row above the tile, the column left of it, and their corner.
    t[0][x + 1] = score[r0 * w + c0 + 1 + x];
    t[x + 1][0] = score[(r0 + 1 + x) * w + c0];
    if (x == 0) {
        t[0][0] = score[r0 * w + c0];
    }
    int ax = a[r0 + x];
    for (int c = 0; c < B; c++) {
        s[x][c] = sub[ax * 4 + b[c0 + c]];
    }
    __syncthreads();
    for (int m = 0; m < 2 * B - 1; m++) {
        int c = m - x;
        if (c >= 0 && c < B) {
            int v = t[x][c] + s[x][c];
            v = max(v, t[x][c + 1] - penalty);
            v = max(v, t[x + 1][c] - penalty);
            t[x + 1][c + 1] = v;
        }
        __syncthreads();
    }
    for (int r = 0; r < B; r++) {
        score[(r0 + 1 + r) * w + c0 + 1 + x] = t[r + 1][x + 1];
    }
}
