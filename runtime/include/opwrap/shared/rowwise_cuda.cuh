// The row-wise CUDA kernels' support, one text for both targets (templates/rowwise/cuda.j2 lays
// out the kernels on it: templates/rowwise/kernel.cuh.j2 for the full target, and
// templates/stable/rowwise.h.j2 for the stable one).
//
// A row is swept by a *group* of threads: a power of two of lanes up to a warp for short rows
// (several rows a block, as aten's persistent softmax does), the whole block for long ones (as
// aten's and Apex's norms do), or, on sm_90 and later, a *cluster* of up to kRowMaxCluster
// blocks for rows too long for one block's registers and shared memory, and for few long rows
// (each row spread over more SMs).  Each thread owns the runs r = first, first + stride, ... of
// the row (a run: 16 bytes of consecutive elements, loaded and stored with one vector
// instruction, or one element where the row is not aligned for that; `stride` the threads of
// the row's group, `first` the thread's place among them).  The row is read from global memory
// once: a thread keeps its first few runs (row_cache) of each row input in registers, and, in a
// block, the rest of them in shared memory (its own slots, filled by asynchronous copies: no
// barrier is needed, each thread reads back only what it wrote), where two blocks of an SM have
// room for them.  Every pass of the program (its reductions, then the outputs) reads that copy;
// only a row too long for the registers and shared memory of a whole cluster is read again from
// global memory.  Column inputs (the same for every row, a weight) are read where a pass uses
// them, through the read-only cache (every row of the SM reads the same ones): holding them in
// registers too would cost the occupancy that hides the loads' latency, and prefetching them
// beside the row's loads slows short rows (docs/pointwise-and-rowwise.md, "CUDA", has the
// measurements behind these choices).  Each kernel is built twice: for layouts whose registers
// hold the whole row (RowSweep's kLong false: no shared-memory, global-memory or cluster code),
// and for any row.
// Torch-free, and not a header of its own: <opwrap/runtime/rowwise.cuh> (the full target) and
// <opwrap/stable/rowwise_cuda.cuh> (the stable target) include it inside their namespace
// opwrap::rt::cuda, after <cooperative_groups.h>, <cuda_pipeline.h> and the standard headers it
// uses (<algorithm>, <cstdint>, <cstring>, <initializer_list>, <type_traits>), with what differs
// between them defined:
// - `kWarp`, 32;
// - `int current_device()` and `cudaStream_t stream()`, the current device and its current stream;
// - `OPWRAP_CUDA_CHECK(expr)`: a cudaError_t that is not cudaSuccess as the target's error.

// kRun consecutive elements, loaded and stored as one (16 bytes: a vector load).
template <typename T, int kRun>
struct alignas(sizeof(T) * kRun) RunOf {
  T val[kRun];
};

// Elements of a 16-byte run of T.
template <typename T>
constexpr int kVecRun = sizeof(T) >= 16 ? 1 : static_cast<int>(16 / sizeof(T));

// A block's threads.  Kernels are built for two such blocks an SM (__launch_bounds__: <= 64
// registers a thread): without that bound a block could take a whole SM, which then idles
// between a row's loads and its stores.
constexpr int kRowMaxThreads = 512;
constexpr int kRowMinBlocks = 2;
constexpr int kRowMaxCluster = 8;  // blocks a row (the portable cluster size)
// The reductions' shared memory: two buffers (consecutive reductions alternate, so one barrier
// a reduction suffices), each one slot a warp and one for the block's result (which the other
// blocks of a cluster read).
constexpr int kRowReduceSlots = kRowMaxThreads / kWarp + 1;
constexpr int kRowShared = 2 * kRowReduceSlots;

// Runs of each of its `row_inputs` a thread holds in registers: 4 runs (64 bytes, 16 registers)
// in all, at least one of each.  More registers a thread would cost occupancy, and with it the
// loads in flight.
constexpr int row_cache(int row_inputs) {
  return row_inputs >= 4 ? 1 : 4 / row_inputs;
}

// How a launch lays rows on threads (row_layout).
struct RowLayout {
  int64_t runs = 0;       // runs a row
  int group = 0;          // threads a row in a block: a power of two <= kWarp, or the block
  int cluster = 1;        // blocks a row (a cluster of them when > 1)
  int rows_per_block = 0;
  int threads = 0;
  int tail_slots = 0;     // runs of each row input a thread keeps in shared memory
  unsigned int blocks = 0;
  size_t smem = 0;        // dynamic shared memory bytes
  bool in_registers = false;  // every run of a row in its threads' registers (the short kernel)
};

// What the device allows a launch of a block-group kernel (row_limits).
struct RowLimits {
  int64_t max_smem = 0;  // dynamic shared memory a block, two blocks an SM
  int max_cluster = 1;   // blocks a row: kRowMaxCluster where the kernel was built for sm_90+
  int sms = 1;           // multiprocessors
};

// The layout of `rows` rows of `runs` runs of `run_bytes` bytes each, `row_inputs` of them read
// a row, at most `cache` runs of each kept in registers (row_cache) by each thread: enough
// threads that each holds at most `cache` runs, a group of a power of two of lanes while that is
// a warp or less, else a block, or the fewest blocks of a cluster whose registers and shared
// memory (`limits.max_smem` a block) hold the row.  While the rows leave the GPU's threads idle
// (fewer than kRowFillThreads an SM), each row gets more threads, up to a block, down to a run
// each (the latency of a small launch is the serial work of one thread), then, for long rows,
// more blocks of a cluster, down to kRowMinBlockRuns runs a block (a cluster's reductions cost
// barriers across SMs, which fewer runs a block do not repay).
constexpr int64_t kRowMinBlockRuns = 2048;
constexpr int64_t kRowFillThreads = 1024;

inline RowLayout row_layout(int64_t rows, int64_t runs, int run_bytes, int row_inputs, int cache, const RowLimits& limits) {
  RowLayout l;
  l.runs = runs;
  const int64_t fill = static_cast<int64_t>(limits.sms) * kRowFillThreads;
  const auto idle = [&](int64_t threads) { return rows * threads * 2 <= fill; };
  const int64_t need = std::max<int64_t>(1, (runs + cache - 1) / cache);
  int64_t want = need;  // threads a row: more while the GPU would be idle, down to a run each
  while (want < kRowMaxThreads && want * 2 <= runs && idle(want)) want *= 2;
  if (want <= kWarp) {
    int g = 1;
    while (g < want) g *= 2;
    l.group = g;
    l.threads = 128;
    l.rows_per_block = l.threads / g;
  } else {
    // A block of `cluster` holding its share of the row with at least `least` threads: its
    // threads and shared-memory slots.
    const auto share = [&](int cluster, int64_t least, RowLayout& out) {
      const int64_t slice = (runs + cluster - 1) / cluster;
      const int64_t threads = std::max<int64_t>(least, (slice + cache - 1) / cache);
      out.cluster = cluster;
      out.group = static_cast<int>(std::min<int64_t>(kRowMaxThreads, (threads + kWarp - 1) / kWarp * kWarp));
      out.threads = out.group;
      out.rows_per_block = 1;
      out.tail_slots = 0;
      out.smem = 0;
      const int64_t tail = slice - static_cast<int64_t>(cache) * out.group;
      if (tail <= 0) return true;
      const int64_t slots = (tail + out.group - 1) / out.group;
      const int64_t bytes = slots * out.group * run_bytes * row_inputs;
      if (bytes > limits.max_smem) return false;  // the tail read again from global memory
      out.tail_slots = static_cast<int>(slots);
      out.smem = static_cast<size_t>(bytes);
      return true;
    };
    int cluster = 1;
    while (!share(cluster, 0, l) && cluster < limits.max_cluster) cluster *= 2;
    if (cluster == 1 && want > l.threads) share(1, want, l);
    while (cluster < limits.max_cluster && rows * cluster < limits.sms && runs / (2 * cluster) >= kRowMinBlockRuns) {
      cluster *= 2;
      share(cluster, 0, l);
    }
  }
  l.in_registers = l.cluster == 1 && static_cast<int64_t>(cache) * l.group >= runs;
  const int64_t groups = (rows + l.rows_per_block - 1) / l.rows_per_block;
  const int64_t most = (int64_t{1} << 30) / l.cluster;
  l.blocks = static_cast<unsigned int>(std::max<int64_t>(1, std::min<int64_t>(groups, most)) * l.cluster);
  return l;
}

// The limits of the current device for `kernel`: its multiprocessors; for long rows (`long_rows`:
// a block or more a row) also the dynamic shared memory a block may ask for so that two blocks
// fit on an SM (one block an SM would leave it idle between a row's loads and its stores), less
// 1 KB for the kernel's static shared memory (its reductions'), and clusters where the code that
// runs was compiled for sm_90 or later (not where an older build runs, or its PTX was compiled
// for this device: the cluster code is compiled out of those).
inline RowLimits row_limits(const void* kernel, bool long_rows) {
  const int device = current_device();
  RowLimits limits;
  int sms = 0;
  OPWRAP_CUDA_CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  limits.sms = std::max(1, sms);
  if (!long_rows) return limits;
  int block = 0, sm = 0;
  OPWRAP_CUDA_CHECK(cudaDeviceGetAttribute(&block, cudaDevAttrMaxSharedMemoryPerBlockOptin, device));
  OPWRAP_CUDA_CHECK(cudaDeviceGetAttribute(&sm, cudaDevAttrMaxSharedMemoryPerMultiprocessor, device));
  cudaFuncAttributes attributes{};
  OPWRAP_CUDA_CHECK(cudaFuncGetAttributes(&attributes, kernel));
  limits.max_smem = std::max(0, std::min(block, sm / 2) - 1024);
  limits.max_cluster = attributes.ptxVersion >= 90 ? kRowMaxCluster : 1;
  return limits;
}

// Launch a kernel over `rows` rows (row_layout's other parameters), its parameters `args` then
// the layout: `in_registers`, built for rows its threads' registers hold (RowSweep's kLong
// false), where the layout holds the row so, else `any`.  Above 48 KB of shared memory, static
// and dynamic together, a kernel must opt in; a cluster is a launch attribute.
template <typename Kernel, typename... Args>
void launch_rows(Kernel in_registers, Kernel any, int64_t rows, int64_t runs, int run_bytes, int row_inputs, int cache, Args... args) {
  // Rows a warp's registers hold need neither shared memory nor clusters.
  const RowLimits limits = row_limits(reinterpret_cast<const void*>(any), runs > static_cast<int64_t>(cache) * kWarp);
  const RowLayout layout = row_layout(rows, runs, run_bytes, row_inputs, cache, limits);
  const Kernel kernel = layout.in_registers ? in_registers : any;
  if (layout.smem > 32 * 1024) {
    OPWRAP_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(layout.smem)));
  }
  if (layout.cluster == 1) {
    kernel<<<layout.blocks, layout.threads, layout.smem, stream()>>>(args..., layout);
    OPWRAP_CUDA_CHECK(cudaGetLastError());
    return;
  }
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(layout.blocks);
  config.blockDim = dim3(layout.threads);
  config.dynamicSmemBytes = layout.smem;
  config.stream = stream();
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeClusterDimension;
  attribute.val.clusterDim.x = static_cast<unsigned int>(layout.cluster);
  attribute.val.clusterDim.y = 1;
  attribute.val.clusterDim.z = 1;
  config.attrs = &attribute;
  config.numAttrs = 1;
  OPWRAP_CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, args..., layout));
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

// The blocks of a row's cluster: barrier, and a pointer to another block's shared memory.  Only
// sm_90 and later have clusters; row_limits gives older builds none, so these never run there.
__device__ __forceinline__ void cluster_sync() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  cooperative_groups::this_cluster().sync();
#else
  __trap();
#endif
}

template <typename T>
__device__ __forceinline__ const T* cluster_shared(const T* p, unsigned int rank) {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  return cooperative_groups::this_cluster().map_shared_rank(const_cast<T*>(p), rank);
#else
  __trap();
  return p;
#endif
}

__device__ __forceinline__ unsigned int cluster_rank(int cluster) {
  return cluster > 1 ? blockIdx.x % static_cast<unsigned int>(cluster) : 0u;
}

// One thread's share of the rows it sweeps: its runs of the current row (kCache in
// registers, the rest in shared memory or, failing room there, global memory), the passes
// over them, and the reductions over the row's group.  kLong false: only for layouts whose
// registers hold the row (RowLayout::in_registers), compiled without the shared-memory and
// global-memory paths and the cluster's reductions, whose code alone, never run there, costs
// such rows registers and instruction fetches.
template <typename scalar_t, int kRun, int kRows, int kCols, int kOuts, bool kLong>
class RowSweep {
 public:
  using Run = RunOf<scalar_t, kRun>;
  static constexpr int kIn = kRows + kCols;
  static constexpr int kCache = row_cache(kRows);

  // `args` is the kernel's __grid_constant__ parameter (read in place, never copied).
  __device__ RowSweep(const RowArgs<scalar_t, kRows, kCols, kOuts>& args, const RowLayout& layout, Run* tail)
      : args_(args), runs_(layout.runs), group_(layout.group), cluster_(layout.cluster),
        lane_(layout.group <= kWarp ? threadIdx.x & (layout.group - 1) : threadIdx.x),
        first_(cluster_rank(clustered() ? cluster_ : 1) * layout.group + lane_),
        stride_(static_cast<int64_t>(layout.group) * (clustered() ? cluster_ : 1)), slots_(layout.tail_slots), tail_(tail) {}

  // This thread's group among the block's (groups of a power of two of lanes, or the block).
  __device__ __forceinline__ int group_index() const {
    return group_ <= kWarp ? static_cast<int>(threadIdx.x) >> (__ffs(group_) - 1) : 0;
  }

  // The first row of this thread's group of rows, and the rows between the groups of one
  // thread's successive iterations (every group of a block, every block of a cluster, iterates
  // alike: their shuffles and barriers stay matched).
  __device__ __forceinline__ int64_t first_row(int rows_per_block) const {
    return static_cast<int64_t>(clustered() ? blockIdx.x / cluster_ : blockIdx.x) * rows_per_block;
  }
  __device__ __forceinline__ int64_t row_stride(int rows_per_block) const {
    return static_cast<int64_t>(clustered() ? gridDim.x / cluster_ : gridDim.x) * rows_per_block;
  }

  // The thread that stores the row's per-row outputs.
  __device__ __forceinline__ bool leader() const { return first_ == 0; }

  // Load this thread's runs of `row` (nothing when the row is past the end: `active` false):
  // the shared-memory part by asynchronous copies (cp.async, issued first: the most bytes in
  // flight at once), then the registers'.
  __device__ __forceinline__ void load(int64_t row, bool active) {
    row_ = row;
    if (kLong && slots_ > 0 && active) {
#pragma unroll 4
      for (int s = 0; s < slots_; ++s) {
        const int64_t r = first_ + static_cast<int64_t>(kCache + s) * stride_;
        if (r >= runs_) break;
#pragma unroll
        for (int k = 0; k < kRows; ++k) copy_to_shared(&tail_[(k * slots_ + s) * group_ + lane_], row_input(k) + r);
      }
      __pipeline_commit();
    }
#pragma unroll
    for (int c = 0; c < kCache; ++c) {
      const int64_t r = first_ + static_cast<int64_t>(c) * stride_;
#pragma unroll
      for (int k = 0; k < kRows; ++k) {
        reg_[c][k] = Run{};
        if (active && r < runs_) reg_[c][k] = row_input(k)[r];
      }
    }
    if (kLong && slots_ > 0 && active) __pipeline_wait_prior(0);
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

  // The reduction R (opwrap/runtime/rowwise.h: Sum, Max, Min) of every thread's `v` over the
  // row's group; every thread of the group gets it, the same value (xor shuffles combine each
  // pair alike; the blocks of a cluster combine the blocks' results in rank order).  `shared`:
  // kRowShared T.
  template <typename R, typename T>
  __device__ __forceinline__ T reduce(T v, T* shared) {
    if (group_ <= kWarp && !clustered()) {  // lanes of a warp
      for (int offset = group_ / 2; offset > 0; offset /= 2) v = R::combine(v, __shfl_xor_sync(0xffffffffu, v, offset));
      return v;
    }
#pragma unroll
    for (int offset = kWarp / 2; offset > 0; offset /= 2) v = R::combine(v, __shfl_xor_sync(0xffffffffu, v, offset));
    T* slots = shared + parity_ * kRowReduceSlots;
    parity_ ^= 1;
    const int lane = threadIdx.x % kWarp, warps = group_ / kWarp;
    if (lane == 0) slots[threadIdx.x / kWarp] = v;
    __syncthreads();
    T total = lane < warps ? slots[lane] : R::template identity<T>();
#pragma unroll
    for (int offset = kWarp / 2; offset > 0; offset /= 2) total = R::combine(total, __shfl_xor_sync(0xffffffffu, total, offset));
    if (!clustered()) return total;
    T* result = slots + kRowReduceSlots - 1;
    if (threadIdx.x == 0) *result = total;
    cluster_sync();
    total = *cluster_shared(result, 0);
    for (int rank = 1; rank < cluster_; ++rank) total = R::combine(total, *cluster_shared(result, rank));
    return total;
  }

  // After the last row: a block of a cluster may not exit while another may still read its
  // shared memory.
  __device__ __forceinline__ void finish() const {
    if (clustered()) cluster_sync();
  }

 private:
  // Whether the row spreads over the blocks of a cluster (never in the build for rows the
  // registers hold: known at compile time there).
  __device__ __forceinline__ bool clustered() const { return kLong && cluster_ > 1; }

  __device__ __forceinline__ const Run* row_input(int k) const {
    return reinterpret_cast<const Run*>(args_.in[k] + row_ * args_.D);
  }

  // *to = *from, asynchronously where the run is 4, 8 or 16 bytes (cp.async), else now.
  __device__ __forceinline__ static void copy_to_shared(Run* to, const Run* from) {
    if constexpr (sizeof(Run) == 4 || sizeof(Run) == 8 || sizeof(Run) == 16) {
      __pipeline_memcpy_async(to, from, sizeof(Run));
    } else {
      *to = *from;
    }
  }

  // g(r, v) for each of this thread's runs r, v[k] input k's run (a column input's loaded here:
  // a pass that does not use it does not load it).
  template <typename G>
  __device__ __forceinline__ void visit(const G& g) const {
#pragma unroll
    for (int c = 0; c < kCache; ++c) {
      const int64_t r = first_ + static_cast<int64_t>(c) * stride_;
      if (r < runs_) {
        Run v[kIn];
#pragma unroll
        for (int k = 0; k < kRows; ++k) v[k] = reg_[c][k];
        columns(r, v);
        g(r, v);
      }
    }
    if constexpr (kLong) {
      for (int64_t r = first_ + static_cast<int64_t>(kCache) * stride_, s = 0; r < runs_; r += stride_, ++s) {
        Run v[kIn];
#pragma unroll
        for (int k = 0; k < kRows; ++k) {
          v[k] = s < slots_ ? tail_[(k * slots_ + s) * group_ + lane_] : row_input(k)[r];
        }
        columns(r, v);
        g(r, v);
      }
    }
  }

  __device__ __forceinline__ void columns(int64_t r, Run (&v)[kIn]) const {
#pragma unroll
    for (int k = kRows; k < kIn; ++k) v[k] = load_read_only(reinterpret_cast<const Run*>(args_.in[k]) + r);
  }

  const RowArgs<scalar_t, kRows, kCols, kOuts>& args_;
  const int64_t runs_;
  const int group_, cluster_, lane_;
  const int64_t first_, stride_;
  const int slots_;
  Run* const tail_;
  int64_t row_ = 0;
  int parity_ = 0;
  Run reg_[kCache][kRows];
};

