// The CPU loops of opwrap::embedding_bag_sum and its backward, shared by their kernels in both
// targets (embedding_bag.h against ATen, stable/embedding_bag.h against the stable API): plain
// C++ and GCC vectors over pointers.  It includes no torch header: its includer has
// c10::BFloat16 and C10_HOST_DEVICE from its target's own (c10/util/BFloat16.h,
// torch/headeronly/util/BFloat16.h).
// The bags' bounds are checked before these run (each target's check_offsets), and every
// index lies in [0, V) (the generated wrapper's index check).
#pragma once

#include "bfloat16_bits.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <vector>

#ifndef C10_HOST_DEVICE
#error "include c10/util/BFloat16.h or torch/headeronly/util/BFloat16.h before embedding_bag_loops.h"
#endif

namespace opwrap::kernels {

constexpr int64_t kPrefetch = 24;  // rows fetched ahead of the one being summed

// The range [start, stop) of indices in bag b (also in the stable target's CUDA kernels).
template <typename index_t>
C10_HOST_DEVICE inline void bag_range(const index_t* offsets, int64_t b, int64_t B, int64_t N, int64_t& start, int64_t& stop) {
  start = static_cast<int64_t>(offsets[b]);
  stop = b + 1 < B ? static_cast<int64_t>(offsets[b + 1]) : N;
}

// Prefetches the `width` values of a row, a cache line at a time: for reading (kWrite 0) or
// for writing (1).
template <int kWrite, typename T>
__attribute__((always_inline)) inline void prefetch_row(const T* row, int64_t width) {
  const char* p = reinterpret_cast<const char*>(row);
  for (int64_t byte = 0; byte < width * static_cast<int64_t>(sizeof(T)); byte += 64) {
    __builtin_prefetch(p + byte, kWrite);
  }
}

// acc[d] += row[d], which the compiler vectorizes.
template <typename acc_t, typename scalar_t>
__attribute__((always_inline)) inline void add_row(acc_t* acc, const scalar_t* row, int64_t D) {
  if constexpr (std::is_same_v<scalar_t, c10::BFloat16> && std::is_same_v<acc_t, float>) {
    // bfloat16 is the top half of a float: a shift the compiler vectorizes (the conversion
    // operator, a function call per element, it does not).
    for (int64_t d = 0; d < D; ++d) {
      const uint32_t bits = static_cast<uint32_t>(row[d].x) << 16;
      float x;
      std::memcpy(&x, &bits, sizeof x);
      acc[d] += x;
    }
  } else {
    for (int64_t d = 0; d < D; ++d) acc[d] += static_cast<acc_t>(row[d]);
  }
}

// Eight lanes of a GCC/Clang vector: 32 bytes of float (an AVX register; two SSE ones).
// at::vec::Vectorized would fix the instruction set at compile time (and is not in the stable
// API), and these loops are compiled for baseline x86-64 with an AVX2 copy chosen at run time.
template <typename T>
struct Lanes8 {
  typedef T type __attribute__((vector_size(8 * sizeof(T))));
};
using v8f = Lanes8<float>::type;
using v8u = Lanes8<uint32_t>::type;

// The bfloat16 nearest to each of eight floats (ties to even; NaN stays NaN), as
// c10::BFloat16's conversion rounds, in the low 16 bits of each lane.
__attribute__((always_inline)) inline v8u bfloat16_bits(v8f v) {
  return v != v ? v8u{} + 0x7FC0u : bfloat16_rounded_bits(reinterpret_cast<v8u>(v));
}

// The sum of one bag's rows [start, stop) over the W columns from c, in registers, with the
// same columns of the row kPrefetch indices ahead (in any bag) prefetched, a cache line after
// each load of one: the rows are random.
//
// A bfloat16 is the top half of a float, so 32 bytes of bfloat16 are two vectors of floats
// without a conversion: the odd elements, masked (x & 0xFFFF0000), and the even ones, shifted
// (x << 16).  They are summed apart and interleaved again once, when the bag is stored.
template <int W, typename scalar_t, typename index_t>
__attribute__((always_inline)) inline void sum_block(const scalar_t* w, const index_t* idx, int64_t start,
                                                     int64_t stop, int64_t N, int64_t D, int64_t c, scalar_t* o) {
  constexpr int kVectors = W * static_cast<int>(sizeof(scalar_t)) / 32;  // 32-byte loads per row
  v8f a[kVectors] = {}, odd[std::is_same_v<scalar_t, float> ? 1 : kVectors] = {};
  for (int64_t i = start; i < stop; ++i) {
    const char* row = reinterpret_cast<const char*>(w + static_cast<int64_t>(idx[i]) * D + c);
    const char* ahead = reinterpret_cast<const char*>(w + static_cast<int64_t>(idx[std::min(i + kPrefetch, N - 1)]) * D + c);
#pragma GCC unroll 16
    for (int k = 0; k < kVectors; ++k) {
      if constexpr (std::is_same_v<scalar_t, float>) {
        v8f v;
        std::memcpy(&v, row + 32 * k, sizeof(v));
        a[k] += v;
      } else {
        v8u v;
        std::memcpy(&v, row + 32 * k, sizeof(v));
        a[k] += reinterpret_cast<v8f>(v << 16);
        odd[k] += reinterpret_cast<v8f>(v & 0xFFFF0000u);
      }
      if (k % 2 == 0) __builtin_prefetch(ahead + 32 * k);
    }
  }
  char* out = reinterpret_cast<char*>(o + c);
#pragma GCC unroll 16
  for (int k = 0; k < kVectors; ++k) {
    if constexpr (std::is_same_v<scalar_t, float>) {
      std::memcpy(out + 32 * k, &a[k], 32);
    } else {
      const v8u v = bfloat16_bits(a[k]) | (bfloat16_bits(odd[k]) << 16);
      std::memcpy(out + 32 * k, &v, 32);
    }
  }
}

// The sums of bags [begin, end): each the sum of its weight rows.  float32 and bfloat16 sum
// blocks of columns in registers (128 float32 columns in 16 AVX registers, summed straight
// from memory; 64 bfloat16 ones in 8, which leaves registers to split the loads), the other
// types and the last columns row by row into `acc` (D values of acc_t, the math type: float
// for float16 and bfloat16).  Each target compiles it into its own AVX2 copy.
template <typename scalar_t, typename index_t, typename acc_t>
__attribute__((always_inline)) inline void sum_bags(const scalar_t* w, const index_t* idx, const index_t* off,
                                                    scalar_t* out, int64_t B, int64_t D, int64_t N, int64_t begin,
                                                    int64_t end, acc_t* acc) {
  constexpr bool kLanes = std::is_same_v<acc_t, float> &&
                          (std::is_same_v<scalar_t, float> || std::is_same_v<scalar_t, c10::BFloat16>);
  constexpr int kWide = std::is_same_v<scalar_t, float> ? 128 : 64;
  for (int64_t b = begin; b < end; ++b) {
    int64_t start = 0, stop = 0;
    bag_range(off, b, B, N, start, stop);
    scalar_t* o = out + b * D;
    int64_t c = 0;
    if constexpr (kLanes) {
      for (; c + kWide <= D; c += kWide) sum_block<kWide>(w, idx, start, stop, N, D, c, o);
      for (; c + 32 <= D; c += 32) sum_block<32>(w, idx, start, stop, N, D, c, o);
    }
    if (c == D) continue;
    const int64_t rest = D - c;
    for (int64_t d = 0; d < rest; ++d) acc[d] = acc_t(0);
    for (int64_t i = start; i < stop; ++i) {
      if (c == 0 && i + kPrefetch < N) prefetch_row<0>(w + static_cast<int64_t>(idx[i + kPrefetch]) * D, D);
      add_row(acc, w + static_cast<int64_t>(idx[i]) * D + c, rest);
    }
    for (int64_t d = 0; d < rest; ++d) o[c + d] = static_cast<scalar_t>(acc[d]);
  }
}

// Adds every bag's gradient row (columns [d0, d0 + width)) into the accumulator rows its
// indices name: acc row v starts at acc + v * stride.  The rows are written in the order of
// the indices, so in random order: each is prefetched kPrefetch indices ahead.
template <typename acc_t, typename scalar_t, typename index_t>
inline void scatter_bags(const scalar_t* g, const index_t* idx, const index_t* off, int64_t B, int64_t D, int64_t N,
                         int64_t d0, int64_t width, acc_t* acc, int64_t stride) {
  for (int64_t b = 0; b < B; ++b) {
    int64_t start = 0, stop = 0;
    bag_range(off, b, B, N, start, stop);
    const scalar_t* gr = g + b * D + d0;
    for (int64_t i = start; i < stop; ++i) {
      if (i + kPrefetch < N) prefetch_row<1>(acc + static_cast<int64_t>(idx[i + kPrefetch]) * stride, width);
      add_row(acc + static_cast<int64_t>(idx[i]) * stride, gr, width);
    }
  }
}

// The backward's columns [d0, d0 + width) of every weight row in `out` (num_weights rows of
// D): float32 and float64 accumulate in `out` itself (no buffer to zero and copy back), the
// reduced types in a float buffer of those columns, rounded into `out` at the end.
// `scatter(acc, stride)` is scatter_bags over these columns into `acc`, as its target compiles it.
template <typename acc_t, typename scalar_t, typename Scatter>
inline void scatter_columns(int64_t num_weights, int64_t D, int64_t d0, int64_t width, scalar_t* out,
                            const Scatter& scatter) {
  if constexpr (std::is_same_v<acc_t, scalar_t>) {
    for (int64_t v = 0; v < num_weights; ++v) std::fill_n(out + v * D + d0, width, scalar_t(0));
    scatter(out + d0, D);
  } else {
    std::vector<acc_t> acc(static_cast<size_t>(num_weights * width), acc_t(0));
    scatter(acc.data(), width);
    for (int64_t v = 0; v < num_weights; ++v) {
      for (int64_t d = 0; d < width; ++d) out[v * D + d0 + d] = static_cast<scalar_t>(acc[v * width + d]);
    }
  }
}

}  // namespace opwrap::kernels
