// Speckle-reducing anisotropic diffusion (SRAD-like), two kernels per iteration.
//
// srad_coeff computes the four directional differences and the diffusion coefficient of every
// pixel (clamp-to-edge borders); srad_update applies the divergence of the coefficient-weighted
// gradient. The host launches both per iteration with q0^2, the speckle scale, decaying over
// time. 16x16 thread blocks, memory-bound (six arrays), with division-heavy arithmetic.

extern "C" __global__ void srad_coeff(const float* __restrict__ img,
                                      float* __restrict__ coeff,
                                      float* __restrict__ dn, float* __restrict__ ds,
                                      float* __restrict__ dw, float* __restrict__ de,
                                      int rows, int cols, float q0sqr)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r >= rows || c >= cols) {
        return;
    }
    int i = r * cols + c;
    float jc = img[i];
    float n = img[max(r - 1, 0) * cols + c] - jc;
    float s = img[min(r + 1, rows - 1) * cols + c] - jc;
    float w = img[r * cols + max(c - 1, 0)] - jc;
    float e = img[r * cols + min(c + 1, cols - 1)] - jc;

    float g2 = (n * n + s * s + w * w + e * e) / (jc * jc);
    float l = (n + s + w + e) / jc;
    float num = 0.5f * g2 - 0.0625f * (l * l);
    float den = 1.0f + 0.25f * l;
    float qsqr = num / (den * den);
    den = (qsqr - q0sqr) / (q0sqr * (1.0f + q0sqr));
    float cv = 1.0f / (1.0f + den);
    cv = fminf(fmaxf(cv, 0.0f), 1.0f);

    coeff[i] = cv;
    dn[i] = n;
    ds[i] = s;
    dw[i] = w;
    de[i] = e;
}

extern "C" __global__ void srad_update(float* __restrict__ img,
                                       const float* __restrict__ coeff,
                                       const float* __restrict__ dn, const float* __restrict__ ds,
                                       const float* __restrict__ dw, const float* __restrict__ de,
                                       int rows, int cols, float lambda)
{
    int c = blockIdx.x * blockDim.x + threadIdx.x;
    int r = blockIdx.y * blockDim.y + threadIdx.y;
    if (r >= rows || c >= cols) {
        return;
    }
    int i = r * cols + c;
    float cn = coeff[i];
    float cs = coeff[min(r + 1, rows - 1) * cols + c];
    float cw = coeff[i];
    float ce = coeff[r * cols + min(c + 1, cols - 1)];
    float div = cn * dn[i] + cs * ds[i] + cw * dw[i] + ce * de[i];
    img[i] = img[i] + 0.25f * lambda * div;
}
