// CUDA kernels of opwrap::cat_rows and opwrap::chunk_rows: row blocks copied between one
// tensor and a list of tensors, all contiguous, so each piece is one flat byte range.
//
// A copy_ per piece costs a launch per piece and, for pieces of a few MB, leaves the device
// idle between them; aten's cat (CatArrayBatchedCopy) copies a batch of inputs in one launch,
// each block finding its input in a table passed as a kernel argument.  So do these: one
// launch per kMaxPieces pieces, the table (source, destination, bytes, first tile) a kernel
// argument; the pieces are cut in tiles of kTileBytes, a block per tile (a grid-stride loop
// past 2^31 - 1 tiles), and a block finds its piece by a scan of the table's tile starts (a
// few dozen entries, in the constant bank).  A tile is copied in 16-byte vectors, four loads
// in flight per thread, when both its ends are 16-byte aligned (the piece's bytes past its
// last whole vector then by the element); an unaligned piece (a bfloat16 block of an odd row
// count, a view at an odd offset) by the element.  Memory bound: read and write each byte
// once, at copy bandwidth.  A piece that is not contiguous is made so first (aten's copy of
// it; the wrapper does not require contiguous tensors).
#pragma once

#include <ATen/core/Tensor.h>
#include <ATen/ops/empty.h>

#include <opwrap/runtime/cuda.cuh>

#include <cstdint>
#include <vector>

#include "cat_rows.h"

namespace opwrap::kernels {
namespace cat_rows_detail {

constexpr int kThreads = 256;
constexpr int kUnroll = 4;                                    // 16-byte loads in flight per thread
constexpr int64_t kTileBytes = int64_t{16} * kThreads * kUnroll;  // 16 KiB
constexpr int kMaxPieces = 32;                                // per launch: a 1.3 KB argument

struct Piece {
  const char* src;
  char* dst;
  int64_t bytes;
  int64_t first_tile;  // tiles of the pieces before this one
};

struct Pieces {
  Piece piece[kMaxPieces];
  int64_t tiles;  // all of them
  int count;
};

template <typename scalar_t>
__global__ void __launch_bounds__(kThreads) copy_pieces(const __grid_constant__ Pieces pieces) {
  for (int64_t tile = blockIdx.x; tile < pieces.tiles; tile += gridDim.x) {
    int p = 0;
    while (p + 1 < pieces.count && pieces.piece[p + 1].first_tile <= tile) ++p;
    const Piece& piece = pieces.piece[p];
    const int64_t begin = (tile - piece.first_tile) * kTileBytes;
    const int64_t end = begin + kTileBytes < piece.bytes ? begin + kTileBytes : piece.bytes;
    const char* src = piece.src + begin;
    char* dst = piece.dst + begin;
    const int64_t bytes = end - begin;
    if ((reinterpret_cast<uintptr_t>(src) | reinterpret_cast<uintptr_t>(dst)) % 16 == 0) {
      const int64_t vectors = bytes / 16;
      const uint4* s = reinterpret_cast<const uint4*>(src);
      uint4* d = reinterpret_cast<uint4*>(dst);
      if (vectors == static_cast<int64_t>(kThreads) * kUnroll) {  // a whole tile: all loads, then all stores
        uint4 v[kUnroll];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) v[u] = s[u * kThreads + threadIdx.x];
#pragma unroll
        for (int u = 0; u < kUnroll; ++u) d[u * kThreads + threadIdx.x] = v[u];
      } else {
        for (int64_t j = threadIdx.x; j < vectors; j += kThreads) d[j] = s[j];
        // The piece's last bytes, under 16: whole elements (pieces hold whole elements).
        const int64_t rest = (bytes - vectors * 16) / static_cast<int64_t>(sizeof(scalar_t));
        if (threadIdx.x < rest) {
          reinterpret_cast<scalar_t*>(dst + vectors * 16)[threadIdx.x] =
              reinterpret_cast<const scalar_t*>(src + vectors * 16)[threadIdx.x];
        }
      }
    } else {
      const int64_t elements = bytes / static_cast<int64_t>(sizeof(scalar_t));
      const scalar_t* s = reinterpret_cast<const scalar_t*>(src);
      scalar_t* d = reinterpret_cast<scalar_t*>(dst);
      for (int64_t j = threadIdx.x; j < elements; j += kThreads) d[j] = s[j];
    }
  }
}

// Copies the pieces (src, dst, bytes), a launch per kMaxPieces of them; empty ones skipped.
template <typename scalar_t>
class Batch {
 public:
  void add(const void* src, void* dst, int64_t bytes) {
    if (bytes == 0) return;
    Piece& p = pieces_.piece[pieces_.count++];
    p = Piece{static_cast<const char*>(src), static_cast<char*>(dst), bytes, pieces_.tiles};
    pieces_.tiles += (bytes + kTileBytes - 1) / kTileBytes;
    if (pieces_.count == kMaxPieces) flush();
  }

  void flush() {
    if (pieces_.count > 0) {
      const int64_t blocks = pieces_.tiles < 65535 * int64_t{64} ? pieces_.tiles : 65535 * int64_t{64};
      copy_pieces<scalar_t><<<static_cast<unsigned>(blocks), kThreads, 0, rt::cuda::stream()>>>(pieces_);
      C10_CUDA_KERNEL_LAUNCH_CHECK();
    }
    pieces_ = Pieces{};
  }

 private:
  Pieces pieces_{};
};

}  // namespace cat_rows_detail

template <typename scalar_t>
void cat_rows_cuda(at::TensorList tensors, at::Tensor& result) {
  cat_rows_detail::Batch<scalar_t> batch;
  std::vector<at::Tensor> keep;  // contiguous copies of non-contiguous pieces, alive until launched
  char* out = static_cast<char*>(result.mutable_data_ptr());
  for (const at::Tensor& t : tensors) {
    if (t.numel() == 0) continue;  // (an empty tensor's data pointer may be null)
    const at::Tensor& c = t.is_contiguous() ? t : keep.emplace_back(t.contiguous());
    const int64_t bytes = static_cast<int64_t>(sizeof(scalar_t)) * c.numel();
    batch.add(c.const_data_ptr(), out, bytes);
    out += bytes;
  }
  batch.flush();
}

template <typename scalar_t>
std::vector<at::Tensor> chunk_rows_cuda(const at::Tensor& self, int64_t chunks) {
  cat_rows_detail::Batch<scalar_t> batch;
  std::vector<at::Tensor> out;
  const int64_t rows = self.size(0) / chunks, cols = self.size(1);
  const at::Tensor c = self.contiguous();
  const int64_t bytes = static_cast<int64_t>(sizeof(scalar_t)) * rows * cols;
  for (int64_t i = 0; i < chunks; ++i) {
    at::Tensor block = at::empty({rows, cols}, self.options());
    if (bytes != 0) batch.add(static_cast<const char*>(c.const_data_ptr()) + i * bytes, block.mutable_data_ptr(), bytes);
    out.push_back(std::move(block));
  }
  batch.flush();
  return out;
}

}  // namespace opwrap::kernels
