// Internals of ResampleCrop (image_kernels.h) shared by its two files: the
// axis plans and the driver (image_resample.cc) and the inner loops, in three
// instruction sets computing the same integers (image_resample_kernels.cc).
#pragma once

#include <cstdint>
#include <vector>

#include "image_kernels.h"

// The AVX2 kernels are compiled for x86-64 with GCC or Clang whatever the
// build's -march: each function carries target("avx2") and runs only where
// the CPU reports AVX2, so a baseline x86-64 binary still starts everywhere.
#if defined(__x86_64__) && defined(__SSE2__) && (defined(__GNUC__) || defined(__clang__))
#define PIPETUNE_HAVE_AVX2_KERNELS 1
#define PIPETUNE_AVX2 __attribute__((target("avx2")))
#else
#define PIPETUNE_HAVE_AVX2_KERNELS 0
#endif

namespace pipetune::runtime::image::resample {

// Fixed point. Vertical weights sum to 128: 8-bit pixels times them, summed
// over any number of taps, stay below 2^15, so the intermediate row fits
// signed 16-bit lanes. Horizontal weights sum to 2^14, so the multiply-add of
// two 16-bit lanes (SSE2's pmaddwd) cannot overflow 32 bits; the result has
// 7 + 14 fractional bits and is rounded once.
constexpr int kVerticalOne = 1 << 7;
constexpr int kHorizontalOne = 1 << 14;
constexpr int kResultShift = 21;
constexpr int kRowPadding = 16;  // zero lanes after a row: vector loads may read past its end

// The kernel sets ResampleCrop can run, best last. Every set computes the
// same integers in the same order of rounding, so the choice changes speed
// only (ResampleKernelsTest checks it byte for byte).
enum class Isa { kPortable, kSse2, kAvx2 };

// How one axis of the output reads the source: output i reads `taps`
// consecutive source pixels from first[i] with weights[i * taps ...]. Every
// output has the same tap count (shorter filters are padded with zero
// weights), which keeps the inner loops branch-free.
struct AxisPlan {
  int taps = 0;
  int lo = 0;  // the plan reads source pixels [lo, hi) only (zero-weight pad taps aside)
  int hi = 0;
  std::vector<int32_t> first;
  std::vector<int16_t> weights;
  // Horizontal plans, vector kernels: weights t and t+1 packed into one
  // 32-bit word (low half t) and repeated as the pmaddwd operand wants it,
  // ready to load. SSE2: output x's pair p is 4 copies at (x * pairs + p) * 4.
  // AVX2 (two outputs per step): outputs 2j and 2j+1 share a block, pair p
  // of it is 4 copies for 2j then 4 for 2j+1 at (2j * pairs + 2p) * 4; an odd
  // width gets a last, zero-weight partner.
  std::vector<int32_t> weight_pairs;
  // Horizontal plans: (first[i] - lo) * 3, the lane to start at; AVX2 pads it
  // to an even count like weight_pairs.
  std::vector<int32_t> row_offsets;
};

// One output row's passes, chosen once per image: the vertical one filters the source rows into
// `row` (16-bit lanes), the horizontal one filters `row` into output pixels.
using VerticalFn = void (*)(const ImageView&, const AxisPlan&, int, int, int, int16_t*);
using HorizontalFn = void (*)(const AxisPlan&, const int16_t*, int, uint8_t*);
// The horizontal pass with normalize folded into its registers (interleaved
// output): each 8-bit result, as `horizontal` computes it, times scale[c]
// plus bias[c] in float, the Normalizer's arithmetic, so the same floats;
// the 8-bit row is never stored.
using HorizontalFloatsFn = void (*)(const AxisPlan&, const int16_t*, int, const float* scale,
                                    const float* bias, float*);

// The same with planar output (CHW): the row's reds, greens and blues go to
// r, g and b.
using HorizontalPlanesFn = void (*)(const AxisPlan&, const int16_t*, int, const float* scale,
                                    const float* bias, float* r, float* g, float* b);

struct Kernels {
  VerticalFn vertical;
  HorizontalFn horizontal;
  // nullptr: `horizontal`, then a Normalizer.
  HorizontalFloatsFn horizontal_floats;
  HorizontalPlanesFn horizontal_planes;
};

// The passes of kernel set `isa` (which must be supported by this build),
// the horizontal one chosen by the plan's tap count.
Kernels KernelsFor(Isa isa, int x_taps);

}  // namespace pipetune::runtime::image::resample
