// Support of generated row-wise CUDA kernels (templates/rowwise/kernel.cuh.j2).
//
// A row is swept by a *group* of threads: a power of two of lanes up to a warp for short rows
// (several rows a block, as aten's persistent softmax does), the whole block for long ones (as
// aten's and Apex's norms do).  Each thread owns the runs r = lane, lane + group, ... of the row
// (a run: 16 bytes of consecutive elements, loaded and stored with one vector instruction, or
// one element where the row is not aligned for that).  The row is read from global memory once:
// a thread keeps its first few runs (row_cache) of each row input in registers, and, in a block
// group, the rest of them in shared memory (its own slots: no barrier is needed, each thread reads
// back only what it wrote), where two blocks of an SM have room for them.  Every pass of the
// program (its reductions, then the outputs) reads that copy; only a row too long for registers
// and shared memory is read again from global memory (then mostly from L2).  Column inputs (the
// same for every row, a weight) are read where a pass uses them, through the read-only cache
// (every row of the SM reads the same ones): holding them in registers too would cost the
// occupancy that hides the loads' latency.
#pragma once

#include <opwrap/runtime/cuda.cuh>

#include <c10/cuda/CUDAFunctions.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>
#include <type_traits>

namespace opwrap::rt::cuda {

// kRun consecutive elements, loaded and stored as one (16 bytes: a vector load).
template <typename T, int kRun>
struct alignas(sizeof(T) * kRun) RunOf {
  T val[kRun];
};

// Elements of a 16-byte run of T.
template <typename T>
constexpr int kVecRun = sizeof(T) >= 16 ? 1 : static_cast<int>(16 / sizeof(T));

constexpr int kRowMaxThreads = 512;  // a block group's threads (<= 128 registers a thread)

// Runs of each of its `row_inputs` a thread holds in registers: 4 runs (64 bytes, 16 registers)
// in all, at least one of each.  More registers a thread would cost occupancy (measured on an
// H100: 8 runs of one input took 122 registers in bfloat16, and bandwidth fell).
constexpr int row_cache(int row_inputs) {
  return row_inputs >= 4 ? 1 : 4 / row_inputs;
}

// How a launch lays rows on threads (row_layout).
struct RowLayout {
  int64_t runs = 0;       // runs a row
  int group = 0;          // threads a row: a power of two <= kWarp, or the block
  int rows_per_block = 0;
  int threads = 0;
  int tail_slots = 0;     // runs of each row input a thread keeps in shared memory
  unsigned int blocks = 0;
  size_t smem = 0;        // dynamic shared memory bytes
};

// The layout of `rows` rows of `runs` runs of `run_bytes` bytes each, `row_inputs` of them read
// a row, `cache` runs of each kept in registers (row_cache): enough threads that each holds at
// most `cache` runs (a group of a power of two of lanes while that is a warp or less); the runs
// beyond those in shared memory while the device allows (`max_smem`: its opt-in maximum a block).
inline RowLayout row_layout(int64_t rows, int64_t runs, int run_bytes, int row_inputs, int cache, int64_t max_smem) {
  RowLayout l;
  l.runs = runs;
  const int64_t need = std::max<int64_t>(1, (runs + cache - 1) / cache);
  if (need <= kWarp) {
    int g = 1;
    while (g < need) g *= 2;
    l.group = g;
    l.threads = 128;
    l.rows_per_block = l.threads / g;
  } else {
    l.group = static_cast<int>(std::min<int64_t>(kRowMaxThreads, (need + kWarp - 1) / kWarp * kWarp));
    l.threads = l.group;
    l.rows_per_block = 1;
    const int64_t tail = runs - static_cast<int64_t>(cache) * l.group;
    if (tail > 0) {
      const int64_t slots = (tail + l.group - 1) / l.group;
      const int64_t bytes = slots * l.group * run_bytes * row_inputs;
      if (bytes <= max_smem) {
        l.tail_slots = static_cast<int>(slots);
        l.smem = static_cast<size_t>(bytes);
      }
    }
  }
  const int64_t blocks = (rows + l.rows_per_block - 1) / l.rows_per_block;
  l.blocks = static_cast<unsigned int>(std::max<int64_t>(1, std::min<int64_t>(blocks, 1 << 30)));
  return l;
}

// The dynamic shared memory a block may ask for so that two blocks fit on an SM of the current
// device (one block an SM would leave it idle between a row's loads and its stores), less 1 KB
// for the kernel's static shared memory (its reductions').
inline int64_t max_dynamic_smem() {
  int block = 0, sm = 0;
  const int device = c10::cuda::current_device();
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&block, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  C10_CUDA_CHECK(cudaDeviceGetAttribute(&sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
  return std::max(0, std::min(block, sm / 2) - 1024);
}

// Launch `kernel` with `layout` (above 48 KB of shared memory, static and dynamic together, a
// kernel must opt in).
template <typename Kernel, typename... Args>
void launch_rows(Kernel kernel, const RowLayout& layout, Args... args) {
  if (layout.smem > 32 * 1024) {
    C10_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(layout.smem)));
  }
  kernel<<<layout.blocks, layout.threads, layout.smem, stream()>>>(args..., layout);
  C10_CUDA_KERNEL_LAUNCH_CHECK();
}

// Whether the rows of these tensors may be read and written a 16-byte run at a time: every
// pointer 16-byte aligned and rows of whole runs.
template <typename scalar_t>
inline bool runs_aligned(std::initializer_list<const void*> pointers, int64_t D) {
  if (D % kVecRun<scalar_t> != 0) return false;
  for (const void* p : pointers) {
    if (reinterpret_cast<std::uintptr_t>(p) % 16 != 0) return false;
  }
  return true;
}

// *p through the read-only data cache (__ldg has overloads for CUDA's vector types only).
template <typename T>
__device__ __forceinline__ T load_read_only(const T* p) {
  static_assert(sizeof(T) == 16 || sizeof(T) == 8 || sizeof(T) == 4 || sizeof(T) == 2, "a run of 2 to 16 bytes");
  using Word = std::conditional_t<sizeof(T) == 16, uint4, std::conditional_t<sizeof(T) == 8, uint2,
               std::conditional_t<sizeof(T) == 4, unsigned int, unsigned short>>>;
  const Word w = __ldg(reinterpret_cast<const Word*>(p));
  T value;
  memcpy(&value, &w, sizeof(T));
  return value;
}

// The tensors of a row-wise kernel: kRows row inputs then kCols column inputs (`in`), and
// kOuts row outputs, each row D elements, contiguous.
template <typename scalar_t, int kRows, int kCols, int kOuts>
struct RowArgs {
  const scalar_t* in[kRows + kCols];
  scalar_t* out[kOuts > 0 ? kOuts : 1];
  int64_t D;
};

// A reduction R (opwrap/runtime/rowwise.h: Sum, Max, Min) over a row's group: lanes of a warp
// by shuffles, a block through `shared` (one T a warp).  Every thread of the group gets it.
template <typename R, typename T>
__device__ __forceinline__ T group_reduce(T v, int group, T* shared) {
  if (group <= kWarp) {
    for (int offset = group / 2; offset > 0; offset /= 2) {
      v = R::combine(v, __shfl_xor_sync(0xffffffffu, v, offset));
    }
    return v;
  }
  return block_reduce<R>(v, shared);
}

// One thread's share of the rows it sweeps: its runs of the current row (kCache in
// registers, the rest in shared memory or, failing room there, global memory), and the passes
// over them.
template <typename scalar_t, int kRun, int kRows, int kCols, int kOuts>
class RowSweep {
 public:
  using Run = RunOf<scalar_t, kRun>;
  static constexpr int kIn = kRows + kCols;
  static constexpr int kCache = row_cache(kRows);

  // `args` is the kernel's __grid_constant__ parameter (read in place, never copied).
  __device__ RowSweep(const RowArgs<scalar_t, kRows, kCols, kOuts>& args, const RowLayout& layout, Run* tail)
      : args_(args), runs_(layout.runs), group_(layout.group), lane_(threadIdx.x % layout.group),
        slots_(layout.tail_slots), tail_(tail) {}

  __device__ __forceinline__ bool leader() const { return lane_ == 0; }

  // Load this thread's runs of `row` (nothing when the row is past the end: `active` false).
  __device__ __forceinline__ void load(int64_t row, bool active) {
    row_ = row;
#pragma unroll
    for (int c = 0; c < kCache; ++c) {
      const int64_t r = lane_ + static_cast<int64_t>(c) * group_;
#pragma unroll
      for (int k = 0; k < kRows; ++k) {
        reg_[c][k] = Run{};
        if (active && r < runs_) reg_[c][k] = row_input(k)[r];
      }
    }
    if (slots_ > 0 && active) {
#pragma unroll 4
      for (int s = 0; s < slots_; ++s) {
        const int64_t r = lane_ + static_cast<int64_t>(kCache + s) * group_;
        if (r >= runs_) break;
#pragma unroll
        for (int k = 0; k < kRows; ++k) tail_[(k * slots_ + s) * group_ + lane_] = row_input(k)[r];
      }
    }
  }

  // f(d, x) for each of this thread's elements d of the row, x[k] the element of input k.
  template <typename F>
  __device__ __forceinline__ void each(const F& f) const {
    visit([&](int64_t r, const Run (&v)[kIn]) {
#pragma unroll
      for (int j = 0; j < kRun; ++j) {
        scalar_t x[kIn];
#pragma unroll
        for (int k = 0; k < kIn; ++k) x[k] = v[k].val[j];
        f(r * kRun + j, x);
      }
    });
  }

  // out[m][d] = o[m] for each of this thread's elements d, f(d, x, o) setting o[m]; a run at a
  // time (16-byte stores).  Nothing is stored for an inactive row.
  template <typename F>
  __device__ __forceinline__ void map(bool active, const F& f) const {
    visit([&](int64_t r, const Run (&v)[kIn]) {
      Run res[kOuts > 0 ? kOuts : 1];
#pragma unroll
      for (int j = 0; j < kRun; ++j) {
        scalar_t x[kIn];
#pragma unroll
        for (int k = 0; k < kIn; ++k) x[k] = v[k].val[j];
        scalar_t o[kOuts > 0 ? kOuts : 1];
        f(r * kRun + j, x, o);
#pragma unroll
        for (int m = 0; m < kOuts; ++m) res[m].val[j] = o[m];
      }
      if (active) {
#pragma unroll
        for (int m = 0; m < kOuts; ++m) reinterpret_cast<Run*>(args_.out[m] + row_ * args_.D)[r] = res[m];
      }
    });
  }

 private:
  __device__ __forceinline__ const Run* row_input(int k) const {
    return reinterpret_cast<const Run*>(args_.in[k] + row_ * args_.D);
  }

  // g(r, v) for each of this thread's runs r, v[k] input k's run (a column input's loaded here:
  // a pass that does not use it does not load it).
  template <typename G>
  __device__ __forceinline__ void visit(const G& g) const {
#pragma unroll
    for (int c = 0; c < kCache; ++c) {
      const int64_t r = lane_ + static_cast<int64_t>(c) * group_;
      if (r < runs_) {
        Run v[kIn];
#pragma unroll
        for (int k = 0; k < kRows; ++k) v[k] = reg_[c][k];
        columns(r, v);
        g(r, v);
      }
    }
    for (int64_t r = lane_ + static_cast<int64_t>(kCache) * group_, s = 0; r < runs_; r += group_, ++s) {
      Run v[kIn];
#pragma unroll
      for (int k = 0; k < kRows; ++k) {
        v[k] = s < slots_ ? tail_[(k * slots_ + s) * group_ + lane_] : row_input(k)[r];
      }
      columns(r, v);
      g(r, v);
    }
  }

  __device__ __forceinline__ void columns(int64_t r, Run (&v)[kIn]) const {
#pragma unroll
    for (int k = kRows; k < kIn; ++k) v[k] = load_read_only(reinterpret_cast<const Run*>(args_.in[k]) + r);
  }

  const RowArgs<scalar_t, kRows, kCols, kOuts>& args_;
  const int64_t runs_;
  const int group_, lane_, slots_;
  Run* const tail_;
  int64_t row_ = 0;
  Run reg_[kCache][kRows];
};

}  // namespace opwrap::rt::cuda
