// Black-Scholes European option pricing (call and put) for a batch of options.
//
// Compute-bound and transcendental-heavy: logf, expf, sqrtf and IEEE division, compiled without
// fast-math so they lower to NVRTC's accurate software sequences (a few ulp), not to the .approx
// hardware instructions. The normal CDF uses the Abramowitz-Stegun polynomial.

__device__ float cnd(float d)
{
    const float a1 = 0.31938153f;
    const float a2 = -0.356563782f;
    const float a3 = 1.781477937f;
    const float a4 = -1.821255978f;
    const float a5 = 1.330274429f;
    const float rsqrt2pi = 0.39894228040143267794f;

    float k = 1.0f / (1.0f + 0.2316419f * fabsf(d));
    float poly = k * (a1 + k * (a2 + k * (a3 + k * (a4 + k * a5))));
    float c = rsqrt2pi * expf(-0.5f * d * d) * poly;
    return d > 0.0f ? 1.0f - c : c;
}

extern "C" __global__ void black_scholes(const float* __restrict__ spot,
                                         const float* __restrict__ strike,
                                         const float* __restrict__ years,
                                         float* __restrict__ call,
                                         float* __restrict__ put,
                                         int n, float rate, float vol)
{
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) {
        return;
    }
    float s = spot[i];
    float x = strike[i];
    float t = years[i];
    float sqrt_t = sqrtf(t);
    float d1 = (logf(s / x) + (rate + 0.5f * vol * vol) * t) / (vol * sqrt_t);
    float d2 = d1 - vol * sqrt_t;
    float n1 = cnd(d1);
    float n2 = cnd(d2);
    float disc = x * expf(-rate * t);
    call[i] = s * n1 - disc * n2;
    put[i] = disc * (1.0f - n2) - s * (1.0f - n1);
}
