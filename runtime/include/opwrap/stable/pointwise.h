// The run-time support of the stable-ABI target's generated pointwise kernels (docs/stable-abi.md,
// "Generated pointwise kernels"): what at::TensorIterator does for the full target's, from what
// torch's stable API tells of a tensor (sizes, strides, dtype, data pointer).
//
// - `prepare`: the inputs broadcast (the full target's message where they do not), the dtype
//   they compute in by torch's type promotion (torch.result_type: tensors of one or more
//   dimensions before 0-d ones; integer inputs to the default float dtype in a float op), the
//   outputs allocated with aten's elementwise output layout (torch._prims_common's
//   compute_elementwise_output_strides, which the fake kernel uses too), inputs of another
//   dtype converted (aten::to), and the loop's dimensions: ordered by the output's memory,
//   size-1 dimensions dropped, neighbours coalesced.
// - `for_each` (CPU): the elements in parallel (torch::stable::parallel_for), row by row; a
//   row whose operands are all dense goes to the generated contiguous loop as it is, any other
//   in blocks gathered into (and, for outputs, scattered from) small contiguous buffers, so the
//   generated loop, which GCC vectorizes, only ever sees contiguous pointers.
// - the CUDA kernels (templates/stable/pointwise.cu.j2) take the same `Loop` by value:
//   `launch_flat`, the vectorized loop both targets share, where the layout allows, else the
//   generated grid-stride loop.
#pragma once

#include <opwrap/stable/math.h>
#include <opwrap/stable/runtime.h>
#if defined(__CUDACC__) && defined(USE_CUDA)
#include <opwrap/shared/pointwise_flat.cuh>
#endif

#include <torch/headeronly/core/ScalarType.h>

#include <algorithm>
#include <array>
#include <cstdint>
#include <cstring>
#include <initializer_list>
#include <string>
#include <vector>

// The CPU loops are compiled once per instruction set and the best is chosen when the library
// loads (GCC's function multiversioning: an ifunc), as aten chooses its DEFAULT, AVX2 and
// AVX-512 kernels: x86-64-v3 (AVX2, FMA, F16C) and x86-64-v4 (AVX-512 F, BW, DQ, VL; BW
// gives 16-bit elements 512-bit vectors).  Other compilers and architectures compile one build,
// and so does -O0 (no __OPTIMIZE__: nothing is vectorized there, so the other builds would be
// the same scalar loop compiled twice more, as the full target's -O0 builds skip their
// CPU-capability units).
#if defined(__GNUC__) && !defined(__clang__) && defined(__x86_64__) && !defined(__CUDACC__) && \
    !defined(__SANITIZE_ADDRESS__) && defined(__OPTIMIZE__)
#define OPWRAP_PW_CLONES __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
#else
#define OPWRAP_PW_CLONES
#endif
// The loop's iterations are independent (the outputs are fresh tensors that no input shares).
#if defined(__clang__)
#define OPWRAP_PW_IVDEP _Pragma("clang loop vectorize(enable)")
#elif defined(__GNUC__) && !defined(__CUDACC__)
#define OPWRAP_PW_IVDEP _Pragma("GCC ivdep")
#else
#define OPWRAP_PW_IVDEP
#endif

HIDDEN_NAMESPACE_BEGIN(opwrap, rt)
namespace pw {

// The most dimensions a loop takes after coalescing (TensorIterator's MAX_DIMS).
constexpr int kMaxDims = 25;

struct Named {
  const char* name;
  const Tensor& tensor;
};

// ---- type promotion (c10::promoteTypes over the dtypes pointwise kernels take) ----------
inline bool is_floating(ScalarType t) {
  return t == ScalarType::Half || t == ScalarType::BFloat16 || t == ScalarType::Float || t == ScalarType::Double;
}

inline int integer_rank(ScalarType t) {  // signed integers by width
  switch (t) {
    case ScalarType::Char:
      return 1;
    case ScalarType::Short:
      return 2;
    case ScalarType::Int:
      return 3;
    case ScalarType::Long:
      return 4;
    default:
      return 0;
  }
}

inline ScalarType promote(ScalarType a, ScalarType b) {
  if (a == b || b == ScalarType::Undefined) return a;
  if (a == ScalarType::Undefined) return b;
  if (a == ScalarType::Bool) return b;
  if (b == ScalarType::Bool) return a;
  const bool fa = is_floating(a), fb = is_floating(b);
  if (fa && fb) {
    if (a == ScalarType::Double || b == ScalarType::Double) return ScalarType::Double;
    return ScalarType::Float;  // Float with a reduced type, or Half with BFloat16
  }
  if (fa) return a;
  if (fb) return b;
  if (a == ScalarType::Byte || b == ScalarType::Byte) {  // uint8 with a signed integer
    const ScalarType s = a == ScalarType::Byte ? b : a;
    return s == ScalarType::Char ? ScalarType::Short : s;
  }
  return integer_rank(a) >= integer_rank(b) ? a : b;
}

// c10's combine_categories (the real types): a higher-priority result keeps its type unless a
// lower-priority one is of a higher category (bool < integer < floating).
inline ScalarType combine_categories(ScalarType higher, ScalarType lower) {
  if (is_floating(higher)) return higher;
  if (higher == ScalarType::Bool || is_floating(lower)) return promote(higher, lower);
  if (higher != ScalarType::Undefined) return higher;
  return lower;
}

// c10::canCast over these dtypes: no floating value into an integer, nothing but a bool into a bool.
inline bool can_cast(ScalarType from, ScalarType to) {
  if (is_floating(from) && !is_floating(to)) return false;
  return from == ScalarType::Bool || to != ScalarType::Bool;
}

// torch.result_type of the inputs: tensors of one or more dimensions first, then 0-d ones.
inline ScalarType result_type(std::initializer_list<Named> inputs) {
  ScalarType dims = ScalarType::Undefined, zero = ScalarType::Undefined;
  for (const Named& in : inputs) {
    ScalarType& r = in.tensor.dim() > 0 ? dims : zero;
    r = promote(r, in.tensor.scalar_type());
  }
  return combine_categories(dims, zero);
}

// torch.get_default_dtype(), which the stable API does not name: the dtype of a tensor made
// without one (asked only where a float op gets integer inputs).
inline ScalarType default_float_dtype() {
  return torch::stable::empty({0}).scalar_type();
}

[[noreturn]] inline void promoted_dtype_error(const char* op, std::initializer_list<Named> inputs, ScalarType dtype,
                                              const char* allowed_names) {
  std::string from;
  for (const Named& in : inputs) {
    from += std::string(from.empty() ? "" : ", ") + "'" + in.name + "' " +
            torch::headeronly::toString(in.tensor.scalar_type());
  }
  fail(op, ": the inputs (", from, ") compute in dtype ", torch::headeronly::toString(dtype),
       ", which is not supported; expected one of: ", allowed_names);
}

// ---- shapes and layouts ---------------------------------------------------------------------
// The broadcast shape of the inputs (checks.h's check_broadcastable, with its message).
inline std::vector<int64_t> broadcast_shape(const char* op, std::initializer_list<Named> inputs) {
  std::vector<int64_t> shape;
  const char* shaped_by = nullptr;
  for (const Named& in : inputs) {
    const IntArrayRef sizes = in.tensor.sizes();
    if (sizes.size() > shape.size()) shape.insert(shape.begin(), sizes.size() - shape.size(), 1);
    for (size_t i = 0; i < sizes.size(); ++i) {
      int64_t& have = shape[shape.size() - sizes.size() + i];
      const int64_t size = sizes[i];
      if (size == have || size == 1) continue;
      OPWRAP_STABLE_CHECK(have == 1, op, ": argument '", in.name, "' has shape ", shape_str(sizes),
                          ", which does not broadcast with '", shaped_by, "' (broadcast so far: ", shape_str(shape),
                          ")");
      have = size;
    }
    if (shaped_by == nullptr) shaped_by = in.name;
  }
  return shape;
}

// A tensor's strides in the broadcast shape (0 along broadcast dimensions), in elements.
inline std::vector<int64_t> expanded_strides(const Tensor& t, const std::vector<int64_t>& shape) {
  std::vector<int64_t> out(shape.size(), 0);
  const int64_t offset = static_cast<int64_t>(shape.size()) - t.dim();
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.size(d) != 1) out[offset + d] = t.stride(d);
  }
  return out;
}

// Whether strides lay out `shape` densely in the order `order` (outermost first), size-1
// dimensions aside: is_contiguous(memory_format) of torch.
inline bool dense_in(const std::vector<int64_t>& shape, const std::vector<int64_t>& strides,
                     const std::vector<int64_t>& order) {
  int64_t expected = 1;
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const int64_t size = shape[*it];
    if (size == 1) continue;
    if (strides[*it] != expected) return false;
    expected *= size;
  }
  return true;
}

// torch._prims_common.compute_elementwise_output_logical_to_physical_perm of the expanded
// inputs: the output's dimensions from outermost to innermost in memory.
inline std::vector<int64_t> output_order(const std::vector<int64_t>& shape,
                                         const std::vector<std::vector<int64_t>>& strides) {
  const int64_t ndim = static_cast<int64_t>(shape.size());
  std::vector<int64_t> identity(ndim);
  for (int64_t d = 0; d < ndim; ++d) identity[d] = d;
  if (ndim <= 1) return identity;
  bool contiguous = true, channels_last = ndim == 4;
  const std::vector<int64_t> cl = {0, 2, 3, 1};
  for (const auto& s : strides) {
    contiguous = contiguous && dense_in(shape, s, identity);
    channels_last = channels_last && dense_in(shape, s, cl);
  }
  if (contiguous && !channels_last) return identity;
  if (channels_last && !contiguous) return cl;
  auto should_swap = [&](int64_t a, int64_t b) {
    for (const auto& s : strides) {
      if (s[a] == 0 || s[b] == 0) continue;
      if (s[a] < s[b]) return -1;
      if (s[a] > s[b]) return 1;
      if (shape[a] > shape[b]) return 1;
    }
    return 0;
  };
  std::vector<int64_t> perm(identity.rbegin(), identity.rend());
  for (int64_t i = 1; i < ndim; ++i) {
    int64_t dim1 = i;
    for (int64_t dim0 = i - 1; dim0 >= 0; --dim0) {
      const int comparison = should_swap(perm[dim0], perm[dim1]);
      if (comparison > 0) {
        std::swap(perm[dim0], perm[dim1]);
        dim1 = dim0;
      } else if (comparison < 0) {
        break;
      }
    }
  }
  return std::vector<int64_t>(perm.rbegin(), perm.rend());
}

// ---- the loop -------------------------------------------------------------------------------
// The operands (outputs, then inputs) over the coalesced dimensions, innermost last, strides in
// elements.  Plain data: the CUDA kernels take it by value.
template <int NOUT, int NIN>
struct Loop {
  static constexpr int N = NOUT + NIN;
  int ndim = 0;
  int64_t numel = 0;
  bool dense = true;  // every operand's elements in one run: one flat range
  int64_t sizes[kMaxDims] = {};
  int64_t strides[N][kMaxDims] = {};
  char* data[N] = {};
};

// Everything a generated wrapper needs after its checks: the dtype, the outputs, the inputs
// (converted where they had another dtype) and the loop over them.
template <int NOUT, int NIN>
struct Prepared {
  ScalarType dtype = ScalarType::Undefined;
  std::array<Tensor, NOUT> outputs;
  std::array<Tensor, NIN> inputs;
  Loop<NOUT, NIN> loop;
  bool copy_out = false;  // an out= overload computed into outputs[0], to be copied into its out= argument
};

// The loop's data pointers: the outputs', then the (converted) inputs'.
template <int NOUT, int NIN>
void point_at_operands(Prepared<NOUT, NIN>& p) {
  for (int o = 0; o < NOUT; ++o) p.loop.data[o] = static_cast<char*>(p.outputs[o].data_ptr());
  for (int j = 0; j < NIN; ++j) p.loop.data[NOUT + j] = static_cast<char*>(const_cast<void*>(p.inputs[j].const_data_ptr()));
}

// An out= overload's result, as aten's out= elementwise ops: written into `out` directly, or
// (where `out` has another dtype, overlapping elements, or shares memory with an input)
// computed into a temporary and copied (cast) into it.
template <int NIN>
const Tensor& write_out(const char* op, const char* out_name, const Prepared<1, NIN>& p, const Tensor& out) {
  if (p.copy_out) {
    with_context(op, [&] {
      Tensor target = out;
      torch::stable::copy_(target, p.outputs[0]);
    }, "copying the result into out= argument '", out_name, "'");
  }
  return out;
}

// `allowed` the declared dtypes (named `allowed_names`), `float_op` whether integer inputs
// compute in the default float dtype (an op declared for floating dtypes only, as torch.div).
// An out= overload passes its out= argument (`out`, named `out_name`): the result type must cast
// to its dtype (aten's enforce_safe_casting_to_output), it is resized to the broadcast shape as
// aten's resize_output does, and the loop writes into it where it can (write_out).
template <int NOUT, int NIN>
Prepared<NOUT, NIN> prepare(const char* op, const char* allocating, std::initializer_list<Named> inputs,
                            bool float_op, std::initializer_list<ScalarType> allowed, const char* allowed_names,
                            const Tensor* out = nullptr, const char* out_name = "") {
  static_assert(NOUT >= 1);
  Prepared<NOUT, NIN> p;
  const Tensor& first = inputs.begin()->tensor;
  bool same_shape = true;
  for (const Named& in : inputs) same_shape = same_shape && in.tensor.sizes().equals(first.sizes());
  std::vector<int64_t> shape;  // the broadcast shape: checked first, as aten does; the first's where all agree
  if (!same_shape) shape = broadcast_shape(op, inputs);
  ScalarType dtype = result_type(inputs);
  if (float_op && !is_floating(dtype)) dtype = default_float_dtype();
  if (std::find(allowed.begin(), allowed.end(), dtype) == allowed.end())
    promoted_dtype_error(op, inputs, dtype, allowed_names);
  p.dtype = dtype;
  // The common case first: no out=, every input contiguous, of the first's shape and of the
  // result's dtype: one flat range over a contiguous output of that shape, what the general path
  // below gives them, without its vectors (a third of a small op's call).  Not for 4 dimensions,
  // where the general path may choose channels-last for a layout that is both.
  bool flat = same_shape && out == nullptr && first.dim() != 4;
  for (const Named& in : inputs) flat = flat && in.tensor.scalar_type() == dtype && in.tensor.is_contiguous();
  if (flat) {
    int k = 0;
    for (const Named& in : inputs) p.inputs[k++] = in.tensor;
    for (int i = 0; i < NOUT; ++i) {
      p.outputs[i] = with_context(op, [&] { return empty_contiguous(first.sizes(), dtype, first.device()); },
                                  "allocating ", allocating);
    }
    Loop<NOUT, NIN>& loop = p.loop;
    loop.numel = first.numel();
    loop.ndim = loop.numel == 1 ? 0 : 1;  // the general path drops size-1 dimensions and merges the rest
    loop.sizes[0] = loop.numel;
    for (int k2 = 0; k2 < NOUT + NIN; ++k2) loop.strides[k2][0] = 1;
    loop.dense = true;
    point_at_operands(p);
    return p;
  }
  if (same_shape) shape.assign(first.sizes().begin(), first.sizes().end());
  int k = 0;
  for (const Named& in : inputs) {
    p.inputs[k++] = in.tensor.scalar_type() == dtype
                        ? in.tensor
                        : with_context(op, [&] { return torch::stable::to(in.tensor, dtype); },
                                       "converting the inputs to their common dtype");
  }
  const int64_t ndim = static_cast<int64_t>(shape.size());
  std::vector<std::vector<int64_t>> in_strides;
  for (const Tensor& t : p.inputs) in_strides.push_back(expanded_strides(t, shape));
  bool direct = false;  // the loop writes into `out` itself
  if (out != nullptr) {
    OPWRAP_STABLE_CHECK(can_cast(dtype, out->scalar_type()), op, ": result type ", torch::headeronly::toString(dtype),
                        " can't be cast to the desired output type ",
                        torch::headeronly::toString(out->scalar_type()), " (out= argument '", out_name, "')");
    resize_output(op, out_name, *out, shape);
    direct = out->scalar_type() == dtype && non_overlapping_and_dense(*out);
    for (const Named& in : inputs) direct = direct && !overlaps(*out, in.tensor);
    p.copy_out = !direct;
  }
  // The layout: the inputs' (expanded) strides decide the output's order in memory; an out=
  // argument written directly has its own.
  std::vector<int64_t> order;
  if (direct) {
    const std::vector<int64_t> strides(out->strides().begin(), out->strides().end());
    order.resize(ndim);
    for (int64_t d = 0; d < ndim; ++d) order[d] = d;
    std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return strides[a] > strides[b]; });
  } else {
    order = output_order(shape, in_strides);
  }
  bool permuted = false;
  std::vector<int64_t> physical(ndim), inverse(ndim);
  for (int64_t i = 0; i < ndim; ++i) {
    physical[i] = shape[order[i]];
    inverse[order[i]] = i;
    permuted = permuted || order[i] != i;
  }
  for (int i = 0; i < NOUT; ++i) {
    if (direct) {
      p.outputs[i] = *out;
      continue;
    }
    p.outputs[i] = with_context(op, [&] {
      Tensor t = empty_contiguous(physical, dtype, first.device());
      return permuted ? torch::stable::permute(t, inverse) : t;
    }, "allocating ", allocating);
  }
  // The loop's dimensions in the output's memory order, size-1 ones dropped, then neighbours
  // whose every operand steps through them as through one dimension merged.
  Loop<NOUT, NIN>& loop = p.loop;
  int64_t numel = 1;
  for (int64_t s : shape) numel *= s;
  loop.numel = numel;
  std::vector<int64_t> sizes;
  std::vector<std::array<int64_t, NOUT + NIN>> steps;
  int64_t out_stride = 1;
  std::vector<int64_t> out_strides(ndim);
  for (int64_t i = ndim - 1; i >= 0; --i) {
    out_strides[order[i]] = direct ? out->stride(order[i]) : out_stride;
    out_stride *= shape[order[i]];
  }
  for (int64_t i = 0; i < ndim; ++i) {
    const int64_t d = order[i];
    if (shape[d] == 1) continue;
    std::array<int64_t, NOUT + NIN> s;
    for (int o = 0; o < NOUT; ++o) s[o] = out_strides[d];
    for (int j = 0; j < NIN; ++j) s[NOUT + j] = in_strides[j][d];
    if (!sizes.empty()) {
      bool merge = true;
      for (int k2 = 0; k2 < NOUT + NIN; ++k2) merge = merge && steps.back()[k2] == s[k2] * shape[d];
      if (merge) {
        sizes.back() *= shape[d];
        steps.back() = s;
        continue;
      }
    }
    sizes.push_back(shape[d]);
    steps.push_back(s);
  }
  OPWRAP_STABLE_CHECK(sizes.size() <= static_cast<size_t>(kMaxDims), op, ": the inputs need ", sizes.size(),
                      " dimensions after coalescing; the stable target's pointwise loops take at most ", kMaxDims);
  loop.ndim = static_cast<int>(sizes.size());
  for (int i = 0; i < loop.ndim; ++i) {
    loop.sizes[i] = sizes[i];
    for (int k2 = 0; k2 < NOUT + NIN; ++k2) loop.strides[k2][i] = steps[i][k2];
  }
  loop.dense = loop.ndim <= 1;
  for (int k2 = 0; loop.dense && loop.ndim == 1 && k2 < NOUT + NIN; ++k2)
    loop.dense = loop.strides[k2][0] == 1;
  point_at_operands(p);
  return p;
}

// The element offsets (in elements) of linear index `i` in each operand of `loop`.
template <int NOUT, int NIN>
C10_HOST_DEVICE inline void offsets(const Loop<NOUT, NIN>& loop, int64_t i, int64_t (&off)[NOUT + NIN]) {
  for (int k = 0; k < NOUT + NIN; ++k) off[k] = loop.dense ? i : 0;
  if (loop.dense) return;
  for (int d = loop.ndim - 1; d >= 0; --d) {
    const int64_t size = loop.sizes[d];
    const int64_t index = i % size;
    i /= size;
    for (int k = 0; k < NOUT + NIN; ++k) off[k] += index * loop.strides[k][d];
  }
}

#if defined(__CUDACC__) && defined(USE_CUDA)
// The launch of a grid-stride kernel over `numel` elements on the current stream of `device_index`.
struct Launch {
  unsigned blocks;
  unsigned threads;
  cudaStream_t stream;
};
inline Launch launch_for(int64_t numel, int32_t device_index) {
  constexpr int64_t threads = 256, most = 65536;
  const int64_t blocks = std::min<int64_t>(std::max<int64_t>((numel + threads - 1) / threads, 1), most);
  return {static_cast<unsigned>(blocks), static_cast<unsigned>(threads),
          static_cast<cudaStream_t>(current_cuda_stream(device_index))};
}
inline void check_launch(const char* op) {
  const cudaError_t error = cudaGetLastError();
  OPWRAP_STABLE_CHECK(error == cudaSuccess, op, ": CUDA kernel launch failed: ", cudaGetErrorString(error));
}

// Runs `f(const opmath_t* inputs)` (the generated functor through flat::ArrayCall) over `loop`
// with the flat loop both targets share (opwrap/shared/pointwise_flat.cuh: 16-byte vectors,
// inputs broadcast along the leading dimensions by column) where the loop's layout is one it
// takes: every operand contiguous over one or two dimensions but for such inputs; says whether
// it did (else the caller's grid-stride loop, an offset per element, runs it).
template <typename scalar_t, typename opmath_t, int NOUT, int NIN, typename func_t>
bool launch_flat(const Loop<NOUT, NIN>& loop, const func_t& f, int32_t device_index, const char* op) {
  constexpr int N = NOUT + NIN;
  if (loop.ndim > 2) return false;
  const int last = loop.ndim - 1;
  const int64_t cols = loop.ndim == 0 ? 1 : loop.sizes[last];
  int64_t inner[N], outer[N];
  for (int k = 0; k < N; ++k) {
    inner[k] = loop.ndim == 0 ? 1 : loop.strides[k][last];
    outer[k] = loop.ndim == 2 ? loop.strides[k][0] : cols;
  }
  opwrap::pw::flat::Operands<N> a{};
  if (!opwrap::pw::flat::plan<scalar_t, NOUT, NIN>(a, loop.data, inner, outer, loop.numel, cols,
                                                   /*need_broadcast=*/false)) {
    return false;
  }
  const cudaError_t error = opwrap::pw::flat::launch<scalar_t, opmath_t, NOUT, NIN>(
      a, loop.numel, cols, f, static_cast<cudaStream_t>(current_cuda_stream(device_index)));
  OPWRAP_STABLE_CHECK(error == cudaSuccess, op, ": CUDA kernel launch failed: ", cudaGetErrorString(error));
  return true;
}
#endif

#if !defined(__CUDACC__)
// How many elements a task of the CPU loop takes at least (aten's GRAIN_SIZE).
constexpr int64_t kGrain = 32768;
// The elements of a block gathered into contiguous buffers (a strided or broadcast row).
constexpr int64_t kBlock = 256;
// The elements a float16 loop converts into float buffers at a time (templates/stable/pointwise.cpp.j2):
// float16 myadd, one thread, AVX-512 build, 1M / 16M elements: blocks of 16 0.93x / 0.87x of the
// full target, 64 1.19x / 0.97x, 256 0.93x / 0.89x (small blocks pay the loop's overhead more
// often, large ones spill more of the unrolled block to the stack).
constexpr int64_t kHalfBlock = 64;
// The most elements of a tile of short rows (at least two rows of at most kTile / 2).
constexpr int64_t kTile = 1024;

// Runs `contiguous(n, outs, ins)` (the generated loop over contiguous pointers) over every
// element of `loop`, in parallel.
template <typename scalar_t, int NOUT, int NIN, typename F>
void for_each(const Loop<NOUT, NIN>& loop, const F& contiguous) {
  constexpr int N = NOUT + NIN;
  if (loop.numel == 0) return;
  auto range = [&](int64_t begin, int64_t end) {
    scalar_t* outs[NOUT > 0 ? NOUT : 1];
    const scalar_t* ins[NIN > 0 ? NIN : 1];
    if (loop.dense) {
      for (int o = 0; o < NOUT; ++o) outs[o] = reinterpret_cast<scalar_t*>(loop.data[o]) + begin;
      for (int j = 0; j < NIN; ++j) ins[j] = reinterpret_cast<const scalar_t*>(loop.data[NOUT + j]) + begin;
      contiguous(end - begin, outs, ins);
      return;
    }
    // The multi-index of `begin`; then row by row along the innermost dimension.
    const int last = loop.ndim - 1;
    int64_t index[kMaxDims];
    int64_t rest = begin;
    for (int d = last; d >= 0; --d) {
      index[d] = rest % loop.sizes[d];
      rest /= loop.sizes[d];
    }
    alignas(64) scalar_t buffers[N][kTile];
    // A buffer filled from a broadcast operand's row (outer stride 0) holds that row repeated
    // `filled_rows` times from `filled`, and is reused while the next tiles read the same row.
    const scalar_t* filled[N] = {};
    int64_t filled_rows[N] = {};
    int64_t at = begin;
    while (at < end) {
      scalar_t* base[N];
      for (int k = 0; k < N; ++k) {
        int64_t offset = 0;
        for (int d = 0; d <= last; ++d) offset += index[d] * loop.strides[k][d];
        base[k] = reinterpret_cast<scalar_t*>(loop.data[k]) + offset;
      }
      const int64_t row = loop.sizes[last];
      if (last >= 1 && index[last] == 0 && row <= kTile / 2 && end - at >= row) {
        // Short rows (a bias over the last dimension, [N, 1] with [1, M]): a tile of whole rows
        // along the next dimension, each operand contiguous over it as it is or in a buffer
        // (gathered; for outputs, scattered after), in one call of the contiguous loop.
        const int64_t rows = std::min({kTile / row, loop.sizes[last - 1] - index[last - 1], (end - at) / row});
        const int64_t m = rows * row;
        for (int k = 0; k < N; ++k) {
          const int64_t inner = loop.strides[k][last], outer = loop.strides[k][last - 1];
          const bool direct = inner == 1 && (outer == row || rows == 1);
          scalar_t* target = direct ? base[k] : buffers[k];
          if (k < NOUT) {
            outs[k] = target;
            continue;
          }
          ins[k - NOUT] = target;
          if (direct || (outer == 0 && filled[k] == base[k] && filled_rows[k] >= rows)) continue;
          const scalar_t* from = base[k];
          for (int64_t r = 0; r < rows; ++r) {
            scalar_t* into = buffers[k] + r * row;
            if (outer == 0 && r > 0) {
              std::memcpy(into, buffers[k], row * sizeof(scalar_t));
            } else if (inner == 1) {
              std::memcpy(into, from + r * outer, row * sizeof(scalar_t));
            } else {
              for (int64_t i = 0; i < row; ++i) into[i] = from[r * outer + i * inner];
            }
          }
          filled[k] = outer == 0 ? base[k] : nullptr;
          filled_rows[k] = rows;
        }
        contiguous(m, outs, ins);
        for (int o = 0; o < NOUT; ++o) {
          const int64_t inner = loop.strides[o][last], outer = loop.strides[o][last - 1];
          if (inner == 1 && (outer == row || rows == 1)) continue;
          for (int64_t r = 0; r < rows; ++r) {
            for (int64_t i = 0; i < row; ++i) base[o][r * outer + i * inner] = buffers[o][r * row + i];
          }
        }
        at += m;
        index[last - 1] += rows;
        for (int d = last - 1; d > 0 && index[d] == loop.sizes[d]; --d) {
          index[d] = 0;
          ++index[d - 1];
        }
        continue;
      }
      // A long row, or part of one: as it is where every operand is dense along it, else in
      // blocks gathered into the buffers.
      const int64_t n = std::min(row - index[last], end - at);
      bool dense = true;
      for (int k = 0; k < N; ++k) dense = dense && loop.strides[k][last] == 1;
      for (int k = 0; k < N; ++k) filled[k] = nullptr;
      if (dense) {
        for (int o = 0; o < NOUT; ++o) outs[o] = base[o];
        for (int j = 0; j < NIN; ++j) ins[j] = base[NOUT + j];
        contiguous(n, outs, ins);
      } else {
        for (int64_t b = 0; b < n; b += kBlock) {
          const int64_t m = std::min(kBlock, n - b);
          for (int k = 0; k < N; ++k) {
            const int64_t s = loop.strides[k][last];
            scalar_t* p = base[k] + b * s;
            scalar_t* target = s == 1 ? p : buffers[k];
            if (k < NOUT) {
              outs[k] = target;
            } else {
              ins[k - NOUT] = target;
              if (s == 0) {
                std::fill(buffers[k], buffers[k] + m, *p);
              } else if (s != 1) {
                for (int64_t i = 0; i < m; ++i) buffers[k][i] = p[i * s];
              }
            }
          }
          contiguous(m, outs, ins);
          for (int o = 0; o < NOUT; ++o) {
            const int64_t s = loop.strides[o][last];
            if (s == 1) continue;
            scalar_t* p = base[o] + b * s;
            for (int64_t i = 0; i < m; ++i) p[i * s] = buffers[o][i];
          }
        }
      }
      at += n;
      index[last] += n;
      for (int d = last; d > 0 && index[d] == loop.sizes[d]; --d) {
        index[d] = 0;
        ++index[d - 1];
      }
    }
  };
  if (loop.numel < kGrain) {
    range(0, loop.numel);
  } else {
    torch::stable::parallel_for(0, loop.numel, kGrain, range);
  }
}
#endif

}  // namespace pw
HIDDEN_NAMESPACE_END(opwrap, rt)
