// PathFinder-style dynamic programming: the cheapest top-to-bottom path through a grid of
// costs, moving down, down-left or down-right each row.
//
// dp[r][c] = wall[r][c] + min(dp[r-1][c-1], dp[r-1][c], dp[r-1][c+1]). One launch advances
// `steps` rows (steps <= 2 * halo < blockDim.x). Block b owns blockDim.x - 2*steps output
// columns and loads `steps` extra columns on each side; the stale margin shrinks by one column
// per row, so after `steps` rows the centre is exact. Two shared rows are used alternately with
// one barrier per row: a barrier inside a loop. The host loops over row groups with ping-pong
// buffers. Integer costs: exact.

#define MAX_BLOCK 1024
#define BIG (1 << 29)

extern "C" __global__ void pathfinder_rows(const int* __restrict__ wall,
                                           const int* __restrict__ src,
                                           int* __restrict__ dst,
                                           int cols, int start_row, int steps)
{
    __shared__ int rows[2][MAX_BLOCK];

    int t = threadIdx.x;
    int bw = blockDim.x;
    int out_w = bw - 2 * steps;
    int c = blockIdx.x * out_w - steps + t;
    bool inside = c >= 0 && c < cols;

    rows[0][t] = inside ? src[c] : BIG;
    __syncthreads();

    int cur = 0;
    for (int i = 0; i < steps; ++i) {
        int next = cur ^ 1;
        if (inside) {
            int best = rows[cur][t];
            if (t > 0 && c > 0) {
                best = min(best, rows[cur][t - 1]);
            }
            if (t < bw - 1 && c < cols - 1) {
                best = min(best, rows[cur][t + 1]);
            }
            rows[next][t] = best + wall[(start_row + i) * cols + c];
        } else {
            rows[next][t] = BIG;
        }
        __syncthreads();
        cur = next;
    }

    if (inside && t >= steps && t < bw - steps) {
        dst[c] = rows[cur][t];
    }
}
