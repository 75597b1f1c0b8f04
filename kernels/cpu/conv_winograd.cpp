#include "kernels/cpu/conv_winograd.h"

#include <omp.h>

#include <algorithm>
#include <cstdint>

#include "kernels/cpu/conv.h"
#include "kernels/cpu/conv_blocked_internal.h"
#include "kernels/cpu/gemm.h"
#include "kernels/cpu/parallel.h"
#include "tensor/error.h"

namespace bastion {

namespace {

using conv_blocked_detail::BlockedKernels;
using conv_blocked_detail::kLanes;

constexpr int kXi = 16;  // positions of a 4x4 transformed tile

// A chunk's transformed tiles (V and M, 4 x H x W x (C + K) floats a sample) are kept near this size (2 MiB,
// in the L2 and L3 caches between the transforms and the GEMMs), but hold at least kMinChunkTiles tiles, so
// each GEMM reuses the transformed weights it streams (1 MiB per position at 512 channels) over that many
// rows. Chosen by a sweep on the AMD EPYC Zen 3 (bench/RESULTS.md, "Winograd F(2x2, 3x3)"; targets of 1, 2
// and 4 MiB, 3 alternated runs): 2 MiB was fastest on the 64- and 128-channel layers; the 512-channel 4x4
// layer was fastest at 4 MiB (16 samples, 64 tiles) and slowest at 1 MiB (4 samples), hence the floor, which
// also sets the 256-channel 8x8 layer's chunk (4 samples; mixed there: 2 samples won 2 of its 3 passes).
constexpr int64_t kChunkTileFloats = int64_t{1} << 19;
constexpr int64_t kMinChunkTiles = 64;

// One Winograd convolution's sizes: `in_ch` channels in, `out_ch` out, H x W planes (even), stride 1.
struct Plan {
  int64_t N, in_ch, out_ch, H, W;
  int64_t chunk;  // samples per chunk
  int64_t tiles_w() const { return W / 2; }
  int64_t tiles() const { return (H / 2) * (W / 2); }  // per sample
  int64_t padded_plane() const { return (H + 2) * (W + 2); }
};

Plan make_plan(int64_t N, int64_t in_ch, int64_t out_ch, int64_t H, int64_t W, int64_t min_tiles = kMinChunkTiles) {
  Plan p{N, in_ch, out_ch, H, W, 1};
  const int64_t per_sample = kXi * p.tiles() * (in_ch + out_ch);
  const int64_t fewest = (min_tiles + p.tiles() - 1) / p.tiles();
  p.chunk = std::clamp<int64_t>(std::max(kChunkTileFloats / per_sample, fewest), 1, N);
  return p;
}

// The weight gradient's GEMMs sum over the chunk's tiles, and every chunk reads and writes all of dU (16 C K
// floats): its chunks hold at least 2 C K / (C + K) tiles, so that traffic is at most the chunk's own
// transformed tiles. Measured (bench/RESULTS.md, "Winograd F(2x2, 3x3)", 6 alternated runs, AMD EPYC Zen 3):
// floors of 256 tiles against 64 gave the 512-channel 4x4 layer 1.26x at 1 and 2 threads and the 256-channel
// 8x8 one 1.23x and 1.05x, and cost the 128-channel 16x16 one 0.74x and 0.89x (4 samples a chunk instead of
// 2); this floor keeps 2 there and takes 16 and all 64 samples on the deeper layers.
Plan weight_plan(const Conv2dGeometry& g) {
  return make_plan(g.N, g.C, g.K, g.H, g.W, std::max(kMinChunkTiles, 2 * g.C * g.K / (g.C + g.K)));
}

// ---- the transforms of one tile, 16 channels wide ----------------------------------------------------

// V[xi] (16 channels each, xi_stride floats apart) = B^T d B for the 4x4 patch at `d` (rows row_stride apart,
// pixels 16 floats apart). B^T = [1 0 -1 0; 0 1 1 0; 0 -1 1 0; 0 1 0 -1].
void input_tile(float* v, int64_t xi_stride, const float* d, int64_t row_stride) {
  float db[4][4][kLanes];  // d B: rows of the patch, transformed along the row
  for (int i = 0; i < 4; ++i) {
    const float* r = d + i * row_stride;
    for (int64_t l = 0; l < kLanes; ++l) {
      const float a0 = r[l], a1 = r[kLanes + l], a2 = r[2 * kLanes + l], a3 = r[3 * kLanes + l];
      db[i][0][l] = a0 - a2;
      db[i][1][l] = a1 + a2;
      db[i][2][l] = a2 - a1;
      db[i][3][l] = a1 - a3;
    }
  }
  for (int j = 0; j < 4; ++j) {
    float* v0 = v + (0 * 4 + j) * xi_stride;
    float* v1 = v + (1 * 4 + j) * xi_stride;
    float* v2 = v + (2 * 4 + j) * xi_stride;
    float* v3 = v + (3 * 4 + j) * xi_stride;
    for (int64_t l = 0; l < kLanes; ++l) {
      v0[l] = db[0][j][l] - db[2][j][l];
      v1[l] = db[1][j][l] + db[2][j][l];
      v2[l] = db[2][j][l] - db[1][j][l];
      v3[l] = db[1][j][l] - db[3][j][l];
    }
  }
}

// The 2x2 output tile at `y` (rows row_stride apart, pixels 16 floats apart) = A^T m A + bias, with
// A^T = [1 1 1 0; 0 1 -1 -1].
void output_tile(float* y, int64_t row_stride, const float* m, int64_t xi_stride, const float* bias) {
  float ma[4][2][kLanes];  // m A: rows of the tile, transformed along the row
  for (int i = 0; i < 4; ++i) {
    const float* m0 = m + (i * 4 + 0) * xi_stride;
    const float* m1 = m + (i * 4 + 1) * xi_stride;
    const float* m2 = m + (i * 4 + 2) * xi_stride;
    const float* m3 = m + (i * 4 + 3) * xi_stride;
    for (int64_t l = 0; l < kLanes; ++l) {
      ma[i][0][l] = m0[l] + m1[l] + m2[l];
      ma[i][1][l] = m1[l] - m2[l] - m3[l];
    }
  }
  for (int j = 0; j < 2; ++j) {
    float* y0 = y + j * kLanes;
    float* y1 = y + row_stride + j * kLanes;
    for (int64_t l = 0; l < kLanes; ++l) {
      y0[l] = bias[l] + (ma[0][j][l] + ma[1][j][l] + ma[2][j][l]);
      y1[l] = bias[l] + (ma[1][j][l] - ma[2][j][l] - ma[3][j][l]);
    }
  }
}

// dM[xi] = A dy A^T for the 2x2 gradient tile at `dy` (the adjoint of output_tile).
void output_adjoint_tile(float* dm, int64_t xi_stride, const float* dy, int64_t row_stride) {
  float ad[4][2][kLanes];  // A dy: 4 rows of 2 pixels
  for (int j = 0; j < 2; ++j) {
    const float* d0 = dy + j * kLanes;
    const float* d1 = dy + row_stride + j * kLanes;
    for (int64_t l = 0; l < kLanes; ++l) {
      ad[0][j][l] = d0[l];
      ad[1][j][l] = d0[l] + d1[l];
      ad[2][j][l] = d0[l] - d1[l];
      ad[3][j][l] = -d1[l];
    }
  }
  for (int i = 0; i < 4; ++i) {
    float* m0 = dm + (i * 4 + 0) * xi_stride;
    float* m1 = dm + (i * 4 + 1) * xi_stride;
    float* m2 = dm + (i * 4 + 2) * xi_stride;
    float* m3 = dm + (i * 4 + 3) * xi_stride;
    for (int64_t l = 0; l < kLanes; ++l) {
      m0[l] = ad[i][0][l];
      m1[l] = ad[i][0][l] + ad[i][1][l];
      m2[l] = ad[i][0][l] - ad[i][1][l];
      m3[l] = -ad[i][1][l];
    }
  }
}

// ---- the weights -------------------------------------------------------------------------------------

// u[xi] = (G g G^T)[xi] for one 3x3 filter g (row-major), G = [1 0 0; .5 .5 .5; .5 -.5 .5; 0 0 1].
void filter_transform(float u[kXi], const float g[9]) {
  float gg[4][3];  // G g
  for (int s = 0; s < 3; ++s) {
    const float a = g[s], b = g[3 + s], c = g[6 + s];
    gg[0][s] = a;
    gg[1][s] = 0.5f * (a + b + c);
    gg[2][s] = 0.5f * (a - b + c);
    gg[3][s] = c;
  }
  for (int i = 0; i < 4; ++i) {
    const float a = gg[i][0], b = gg[i][1], c = gg[i][2];
    u[i * 4 + 0] = a;
    u[i * 4 + 1] = 0.5f * (a + b + c);
    u[i * 4 + 2] = 0.5f * (a - b + c);
    u[i * 4 + 3] = c;
  }
}

// w[r * 3 + s][l] = (G^T du[.][l] G)[r][s] for 16 filters l (the adjoint of filter_transform).
void filter_adjoint(float w[9][kLanes], const float du[kXi][kLanes]) {
  float gd[3][4][kLanes];  // G^T du
  for (int j = 0; j < 4; ++j) {
    for (int64_t l = 0; l < kLanes; ++l) {
      const float a = du[j][l], b = du[4 + j][l], c = du[8 + j][l], d = du[12 + j][l];
      gd[0][j][l] = a + 0.5f * (b + c);
      gd[1][j][l] = 0.5f * (b - c);
      gd[2][j][l] = 0.5f * (b + c) + d;
    }
  }
  for (int r = 0; r < 3; ++r) {
    for (int64_t l = 0; l < kLanes; ++l) {
      const float a = gd[r][0][l], b = gd[r][1][l], c = gd[r][2][l], d = gd[r][3][l];
      w[r * 3 + 0][l] = a + 0.5f * (b + c);
      w[r * 3 + 1][l] = 0.5f * (b - c);
      w[r * 3 + 2][l] = 0.5f * (b + c) + d;
    }
  }
}

// grad_weight (K, C, 3, 3), ASSIGNED, from dU[xi][c][k]: 16 output channels at a time, so each position's
// dU is read along its rows.
void filter_adjoints(float* grad_weight, const float* dU, int64_t C, int64_t K, int threads) {
#pragma omp parallel for schedule(static) num_threads(threads) if (C * K * 9 >= kParallelMinWork)
  for (int64_t c = 0; c < C; ++c) {
    for (int64_t k0 = 0; k0 < K; k0 += kLanes) {
      float du[kXi][kLanes], w[9][kLanes];
      for (int xi = 0; xi < kXi; ++xi)
        for (int64_t l = 0; l < kLanes; ++l) du[xi][l] = dU[(xi * C + c) * K + k0 + l];
      filter_adjoint(w, du);
      for (int64_t l = 0; l < kLanes; ++l)
        for (int t = 0; t < 9; ++t) grad_weight[((k0 + l) * C + c) * 9 + t] = w[t][l];
    }
  }
}

// U[xi][i][o] for a convolution with `in_ch` inputs and `out_ch` outputs. The forward reads weight
// [k = o][c = i]; grad_in (`flipped`) reads weight[k = i][c = o] turned by 180 degrees.
void transform_weights(float* U, const float* weight, int64_t in_ch, int64_t out_ch, bool flipped, int threads) {
#pragma omp parallel for schedule(static) num_threads(threads) if (in_ch * out_ch * 9 >= kParallelMinWork)
  for (int64_t i = 0; i < in_ch; ++i) {
    for (int64_t o = 0; o < out_ch; ++o) {
      const float* w = flipped ? weight + (i * out_ch + o) * 9 : weight + (o * in_ch + i) * 9;
      float g[9], u[kXi];
      for (int t = 0; t < 9; ++t) g[t] = flipped ? w[8 - t] : w[t];
      filter_transform(u, g);
      for (int xi = 0; xi < kXi; ++xi) U[(xi * in_ch + i) * out_ch + o] = u[xi];
    }
  }
}

// ---- one chunk's passes ------------------------------------------------------------------------------

// body(n, block, ty, tx, t) for each of the chunk's samples n, 16-channel blocks and tiles t = (ty, tx),
// one (sample, block) pair per item of the threads' loop.
template <class Body>
void for_each_tile(const Plan& p, int64_t samples, int64_t blocks, int threads, const Body& body) {
#pragma omp parallel for collapse(2) schedule(static) num_threads(threads)
  for (int64_t n = 0; n < samples; ++n) {
    for (int64_t block = 0; block < blocks; ++block) {
      for (int64_t ty = 0; ty < p.H / 2; ++ty) {
        for (int64_t tx = 0; tx < p.tiles_w(); ++tx) body(n, block, ty, tx, n * p.tiles() + ty * p.tiles_w() + tx);
      }
    }
  }
}

// V[xi][t][c] for the chunk's samples from their blocked, padded inputs xb ([n][c / 16][H + 2][W + 2][16]).
void input_transform(float* V, const float* xb, const Plan& p, int64_t samples, int threads) {
  const int64_t blocks = p.in_ch / kLanes, row = (p.W + 2) * kLanes, xi_stride = samples * p.tiles() * p.in_ch;
  for_each_tile(p, samples, blocks, threads, [&](int64_t n, int64_t cb, int64_t ty, int64_t tx, int64_t t) {
    const float* plane = xb + (n * blocks + cb) * p.padded_plane() * kLanes;
    input_tile(V + t * p.in_ch + cb * kLanes, xi_stride, plane + 2 * ty * row + 2 * tx * kLanes, row);
  });
}

// The chunk's blocked outputs yb ([n][k / 16][H][W][16]) from M[xi][t][k], plus the bias (null: none).
void output_transform(float* yb, const float* M, const float* bias, const Plan& p, int64_t samples, int threads) {
  const int64_t blocks = p.out_ch / kLanes, row = p.W * kLanes, xi_stride = samples * p.tiles() * p.out_ch;
  const float zeros[kLanes] = {};
  for_each_tile(p, samples, blocks, threads, [&](int64_t n, int64_t kb, int64_t ty, int64_t tx, int64_t t) {
    float* plane = yb + (n * blocks + kb) * p.H * p.W * kLanes;
    output_tile(plane + 2 * ty * row + 2 * tx * kLanes, row, M + t * p.out_ch + kb * kLanes, xi_stride,
                bias ? bias + kb * kLanes : zeros);
  });
}

// dM[xi][t][k] from the chunk's blocked grad_out dyb ([n][k / 16][H][W][16]).
void output_adjoint(float* dM, const float* dyb, const Plan& p, int64_t samples, int threads) {
  const int64_t blocks = p.out_ch / kLanes, row = p.W * kLanes, xi_stride = samples * p.tiles() * p.out_ch;
  for_each_tile(p, samples, blocks, threads, [&](int64_t n, int64_t kb, int64_t ty, int64_t tx, int64_t t) {
    const float* plane = dyb + (n * blocks + kb) * p.H * p.W * kLanes;
    output_adjoint_tile(dM + t * p.out_ch + kb * kLanes, xi_stride, plane + 2 * ty * row + 2 * tx * kLanes, row);
  });
}

// The layout conversions of a chunk, one (sample, 16-channel block) per item: a block's planes and its
// blocked copy are contiguous in both layouts, so each item converts "16 channels" of one sample, and a
// chunk of one sample still spreads over the threads.
void to_blocked(float* dst, const float* src, int64_t C, int64_t H, int64_t W, int64_t pad, int64_t samples,
                int threads) {
  const BlockedKernels& isa = *conv_blocked_detail::default_kernels();
  const int64_t blocks = C / kLanes, dst_block = kLanes * (H + 2 * pad) * (W + 2 * pad), src_block = kLanes * H * W;
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t item = 0; item < samples * blocks; ++item) {
    isa.to_blocked(dst + item * dst_block, src + item * src_block, kLanes, H, W, pad);
  }
}

void from_blocked(float* dst, const float* src, int64_t C, int64_t P, int64_t samples, int threads) {
  const BlockedKernels& isa = *conv_blocked_detail::default_kernels();
  const int64_t blocks = C / kLanes, block = kLanes * P;
#pragma omp parallel for schedule(static) num_threads(threads)
  for (int64_t item = 0; item < samples * blocks; ++item) {
    isa.from_blocked(dst + item * block, src + item * block, kLanes, P);
  }
}

// The workspace of one Winograd convolution after its U: a chunk's blocked input, V, M and blocked output.
struct ChunkBuffers {
  float *xb, *V, *M, *yb;
};

int64_t chunk_floats(const Plan& p) {
  const int64_t tiles = p.chunk * p.tiles();
  return p.chunk * p.in_ch * p.padded_plane() + kXi * tiles * (p.in_ch + p.out_ch) + p.chunk * p.out_ch * p.H * p.W;
}

ChunkBuffers chunk_buffers(float* ws, const Plan& p) {
  const int64_t tiles = p.chunk * p.tiles();
  ChunkBuffers b;
  b.xb = ws;
  b.V = b.xb + p.chunk * p.in_ch * p.padded_plane();
  b.M = b.V + kXi * tiles * p.in_ch;
  b.yb = b.M + kXi * tiles * p.out_ch;
  return b;
}

// out (N, out_ch, H, W) = the convolution of in (N, in_ch, H, W) with the transformed weights U.
void winograd_convolve(float* out, const float* in, const float* U, const float* bias, const Plan& p, float* ws,
                       int threads) {
  const ChunkBuffers b = chunk_buffers(ws, p);
  const int64_t plane = p.H * p.W;
  for (int64_t n0 = 0; n0 < p.N; n0 += p.chunk) {
    const int64_t samples = std::min(p.chunk, p.N - n0), tiles = samples * p.tiles();
    to_blocked(b.xb, in + n0 * p.in_ch * plane, p.in_ch, p.H, p.W, 1, samples, threads);
    input_transform(b.V, b.xb, p, samples, threads);
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int xi = 0; xi < kXi; ++xi) {
      gemm_one_thread_cpu(false, false, tiles, p.out_ch, p.in_ch, b.V + xi * tiles * p.in_ch, p.in_ch,
                          U + xi * p.in_ch * p.out_ch, p.out_ch, 0.0f, b.M + xi * tiles * p.out_ch, p.out_ch);
    }
    output_transform(b.yb, b.M, bias, p, samples, threads);
    from_blocked(out + n0 * p.out_ch * plane, b.yb, p.out_ch, plane, samples, threads);
  }
}

// grad_weight (K, C, 3, 3) of the forward plan p (in_ch = C, out_ch = K), ASSIGNED. dU: kXi * C * K floats.
// V is transformed again from the input rather than kept from the forward: the whole batch's V is 4x the
// input (64 MiB for ResNet18's 64-channel 32x32 layer at batch 64), against an O(data) transform per chunk.
void winograd_weight_gradient(float* grad_weight, float* dU, const float* grad_out, const float* in, const Plan& p,
                              float* ws, int threads) {
  const ChunkBuffers b = chunk_buffers(ws, p);  // xb, V as the forward; M holds dM, yb grad_out's blocked copy
  const int64_t plane = p.H * p.W;
  for (int64_t n0 = 0; n0 < p.N; n0 += p.chunk) {
    const int64_t samples = std::min(p.chunk, p.N - n0), tiles = samples * p.tiles();
    to_blocked(b.xb, in + n0 * p.in_ch * plane, p.in_ch, p.H, p.W, 1, samples, threads);
    input_transform(b.V, b.xb, p, samples, threads);
    to_blocked(b.yb, grad_out + n0 * p.out_ch * plane, p.out_ch, p.H, p.W, 0, samples, threads);
    output_adjoint(b.M, b.yb, p, samples, threads);
    const float beta = n0 == 0 ? 0.0f : 1.0f;
#pragma omp parallel for schedule(static) num_threads(threads)
    for (int xi = 0; xi < kXi; ++xi) {
      gemm_one_thread_cpu(true, false, p.in_ch, p.out_ch, tiles, b.V + xi * tiles * p.in_ch, p.in_ch,
                          b.M + xi * tiles * p.out_ch, p.out_ch, beta, dU + xi * p.in_ch * p.out_ch, p.out_ch);
    }
  }
  filter_adjoints(grad_weight, dU, p.in_ch, p.out_ch, threads);
}

void check_supported(const Conv2dGeometry& g) {
  BASTION_CHECK(conv2d_winograd_supported(g), "conv2d_winograd: this layer is not supported (3x3, stride 1, ",
                "padding 1, C and K multiples of 16, even H and W, and a CPU with AVX2 + FMA); got C=", g.C, " K=", g.K,
                " R=", g.R, " S=", g.S, " stride=", g.stride, " padding=", g.padding, " H=", g.H, " W=", g.W);
}

}  // namespace

bool conv2d_winograd_supported(const Conv2dGeometry& g) {
  return g.R == 3 && g.S == 3 && g.padding == 1 && g.stride == 1 && g.C % kLanes == 0 && g.K % kLanes == 0 && g.C > 0 &&
         g.K > 0 && g.H > 0 && g.W > 0 && g.H % 2 == 0 && g.W % 2 == 0 && g.N > 0 &&
         conv_blocked_detail::default_kernels() != nullptr;
}

// Without AVX-512, every supported layer, all three passes: the ladder against the channel-blocked AVX2
// kernels (bench/RESULTS.md, "Winograd F(2x2, 3x3)", 2026-11-30, AMD EPYC Zen 3, batch 64, medians of 5
// interleaved repetitions) won every pass of ResNet18's four stride-1 layers at 1 and 2 threads, x1.10 to
// x2.18. With AVX-512 the channel-blocked kernels run at 70-80 % of peak and Winograd has not been measured
// against them on such a CPU, so the op keeps them there.
bool conv2d_winograd_preferred(const Conv2dGeometry& g) {
#if defined(__AVX512F__)
  (void)g;
  return false;
#else
  return conv2d_winograd_supported(g);
#endif
}

int64_t conv2d_winograd_chunk_samples(const Conv2dGeometry& g) { return make_plan(g.N, g.C, g.K, g.H, g.W).chunk; }

int64_t conv2d_winograd_workspace_floats(const Conv2dGeometry& g) {
  const Plan forward = make_plan(g.N, g.C, g.K, g.H, g.W), backward = make_plan(g.N, g.K, g.C, g.H, g.W);
  return kXi * g.C * g.K + std::max({chunk_floats(forward), chunk_floats(backward), chunk_floats(weight_plan(g))});
}

void conv2d_winograd_forward_cpu(float* out, const float* in, const float* weight, const float* bias,
                                 const Conv2dGeometry& g, float* workspace, int threads) {
  check_supported(g);
  const Plan p = make_plan(g.N, g.C, g.K, g.H, g.W);
  float* U = workspace;
  transform_weights(U, weight, g.C, g.K, false, threads);
  winograd_convolve(out, in, U, bias, p, U + kXi * g.C * g.K, threads);
}

void conv2d_winograd_backward_cpu(float* grad_in, float* grad_weight, float* grad_bias, const float* grad_out,
                                  const float* in, const float* weight, const Conv2dGeometry& g, float* workspace,
                                  int threads) {
  check_supported(g);
  float* U = workspace;  // U of grad_in's convolution, then dU
  float* ws = U + kXi * g.C * g.K;
  if (grad_in) {
    const Plan p = make_plan(g.N, g.K, g.C, g.H, g.W);
    transform_weights(U, weight, g.K, g.C, true, threads);
    winograd_convolve(grad_in, grad_out, U, nullptr, p, ws, threads);
  }
  if (grad_weight) {
    winograd_weight_gradient(grad_weight, U, grad_out, in, weight_plan(g), ws, threads);
  }
  if (grad_bias) conv2d_backward_bias_cpu(grad_bias, grad_out, g);
}

}  // namespace bastion
