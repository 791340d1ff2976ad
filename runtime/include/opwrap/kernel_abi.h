/* opwrap's C kernel ABI: what a kernel written in C, Rust, CUDA C or any language that can
 * export a C symbol receives from the generated wrapper.  Plain C99; includes no torch header,
 * so a kernel file that includes only this (and its op's generated prototype header,
 * "abi/<op>.h") compiles in a fraction of a second and does not depend on the torch version.
 *
 * The generated wrapper does everything a C++ kernel's wrapper does (argument checks, dtype
 * dispatch, contiguity, output allocation from the shape rule, the device guard), then calls
 * one symbol per op and dtype combination:
 *
 *     int32_t <symbol>_<dtype>(opwrap_context* ctx, <arguments>, <outputs>, <returned scalars>);
 *
 * It returns OPWRAP_OK, or OPWRAP_ERROR after opwrap_fail(), whose message reaches Python as
 * a RuntimeError naming the op.  The kernel only computes; it must not unwind (no C++
 * exception, no Rust panic) out of the call: the generated Rust bindings catch panics.
 *
 * Schema types, as the kernel receives them:
 *   Tensor, Tensor?          const opwrap_tensor*   (NULL: an absent Tensor?)
 *   Tensor(a!), outputs      opwrap_tensor*         (an output may be resized: opwrap_resize)
 *   Tensor[]                 opwrap_tensor_list
 *   int, SymInt              int64_t                int?      opwrap_optional_int
 *   float                    double                 float?    opwrap_optional_float
 *   bool, SymBool            bool                   bool?     opwrap_optional_bool
 *   int[], SymInt[]          opwrap_int_array       int[]?    opwrap_optional_int_array
 *   float[]                  opwrap_float_array
 *   str                      opwrap_string          str?      opwrap_optional_string
 *   Scalar                   opwrap_scalar          ScalarType int32_t (OPWRAP_FLOAT32, ...)
 *   ScalarType?              opwrap_optional_dtype
 *   a returned int/float/bool: a pointer the kernel writes (int64_t*, double*, bool*), last.
 *
 * Callbacks through the context: opwrap_fail (an error message), opwrap_resize (an output
 * whose size the kernel finds out), opwrap_parallel_for (torch's thread pool) and
 * opwrap_workspace (scratch memory from torch's allocator).
 */
#ifndef OPWRAP_KERNEL_ABI_H
#define OPWRAP_KERNEL_ABI_H

#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>

#define OPWRAP_KERNEL_ABI_VERSION 1

#define OPWRAP_OK 0
#define OPWRAP_ERROR 1

/* dtype codes: the values of c10::ScalarType (checked by opwrap/runtime/abi.h). */
#define OPWRAP_UINT8 0
#define OPWRAP_INT8 1
#define OPWRAP_INT16 2
#define OPWRAP_INT32 3
#define OPWRAP_INT64 4
#define OPWRAP_FLOAT16 5
#define OPWRAP_FLOAT32 6
#define OPWRAP_FLOAT64 7
#define OPWRAP_COMPLEX32 8
#define OPWRAP_COMPLEX64 9
#define OPWRAP_COMPLEX128 10
#define OPWRAP_BOOL 11
#define OPWRAP_BFLOAT16 15
#define OPWRAP_FLOAT8_E5M2 23
#define OPWRAP_FLOAT8_E4M3FN 24
#define OPWRAP_FLOAT8_E5M2FNUZ 25
#define OPWRAP_FLOAT8_E4M3FNUZ 26
#define OPWRAP_UINT16 27
#define OPWRAP_UINT32 28
#define OPWRAP_UINT64 29
#define OPWRAP_FLOAT8_E8M0FNU 44

/* device types: the values of c10::DeviceType. */
#define OPWRAP_CPU 0
#define OPWRAP_CUDA 1

/* opwrap_scalar.kind */
#define OPWRAP_SCALAR_FLOAT 0
#define OPWRAP_SCALAR_INT 1
#define OPWRAP_SCALAR_BOOL 2

#ifdef __cplusplus
extern "C" {
#endif

/* A tensor as the kernel sees it.  `data` points at the first element (the storage offset
 * applied); element (i0, i1, ...) is at data + sum(ik * strides[k]) elements.  Inputs are
 * contiguous unless the declaration says `contiguous: false`; outputs the wrapper allocates
 * always are. */
typedef struct opwrap_tensor {
  void* data;
  const int64_t* sizes;   /* ndim of them */
  const int64_t* strides; /* ndim of them, in elements */
  int64_t ndim;
  int32_t dtype;        /* OPWRAP_FLOAT32, ... */
  int32_t device_type;  /* OPWRAP_CPU or OPWRAP_CUDA */
  int32_t device_index; /* -1 on the CPU */
  int32_t reserved;
  void* handle; /* the wrapper's: what opwrap_resize needs; do not touch */
} opwrap_tensor;

typedef struct { const opwrap_tensor* data; int64_t len; } opwrap_tensor_list;
typedef struct { const int64_t* data; int64_t len; } opwrap_int_array;
typedef struct { const double* data; int64_t len; } opwrap_float_array;
typedef struct { const char* data; int64_t len; } opwrap_string; /* UTF-8, not NUL-terminated */
typedef struct { int64_t value; bool present; } opwrap_optional_int;
typedef struct { double value; bool present; } opwrap_optional_float;
typedef struct { bool value; bool present; } opwrap_optional_bool;
typedef struct { int32_t value; bool present; } opwrap_optional_dtype;
typedef struct { const int64_t* data; int64_t len; bool present; } opwrap_optional_int_array;
typedef struct { const char* data; int64_t len; bool present; } opwrap_optional_string;
/* A Python number: `kind` says which field holds it (an int or bool is also in as_float). */
typedef struct { double as_float; int64_t as_int; int32_t kind; } opwrap_scalar;

typedef struct opwrap_context opwrap_context;
typedef void (*opwrap_range_fn)(void* data, int64_t begin, int64_t end);

/* What the wrapper gives every call: where it runs, and the callbacks below. */
struct opwrap_context {
  uint32_t abi_version; /* OPWRAP_KERNEL_ABI_VERSION */
  int32_t device_type;
  int32_t device_index;
  int32_t num_threads; /* torch's intra-op threads (torch.get_num_threads()) */
  void* stream;        /* CUDA: the device's current cudaStream_t; NULL on the CPU */
  const char* op;      /* "namespace::name", for messages */
  int32_t (*resize)(opwrap_context* ctx, opwrap_tensor* output, int64_t ndim, const int64_t* sizes);
  void (*parallel_for)(opwrap_context* ctx, int64_t begin, int64_t end, int64_t grain, opwrap_range_fn fn,
                       void* data);
  void (*set_error)(opwrap_context* ctx, const char* message, int64_t len);
  void* (*workspace)(opwrap_context* ctx, int64_t nbytes);
  void* state; /* the wrapper's */
};

/* Refuse the call: `message` (printf-style) reaches Python as "RuntimeError: <op>: message".
 * Returns OPWRAP_ERROR, for `return opwrap_fail(ctx, "...");`. */
static inline int32_t opwrap_fail(opwrap_context* ctx, const char* format, ...) {
  char message[1024];
  va_list args;
  va_start(args, format);
  int n = vsnprintf(message, sizeof message, format, args);
  va_end(args);
  if (n < 0) n = 0;
  if (n >= (int)sizeof message) n = (int)sizeof message - 1;
  ctx->set_error(ctx, message, n);
  return OPWRAP_ERROR;
}

/* Give an output its size once the kernel knows it (a data-dependent shape rule, "?n"): the
 * tensor is reallocated and `output` updated (data, sizes, strides, ndim).  Returns OPWRAP_OK,
 * or OPWRAP_ERROR with the message set: return it. */
static inline int32_t opwrap_resize(opwrap_context* ctx, opwrap_tensor* output, int64_t ndim, const int64_t* sizes) {
  return ctx->resize(ctx, output, ndim, sizes);
}

/* fn(data, b, e) over disjoint [b, e) covering [begin, end), on torch's intra-op thread pool
 * (at::parallel_for): chunks of at least `grain`.  fn must not unwind. */
static inline void opwrap_parallel_for(opwrap_context* ctx, int64_t begin, int64_t end, int64_t grain,
                                       opwrap_range_fn fn, void* data) {
  ctx->parallel_for(ctx, begin, end, grain, fn, data);
}

/* Scratch memory on the call's device from torch's allocator (the caching allocator on CUDA,
 * ordered on ctx->stream), at least 16-byte aligned, freed when the call returns.  NULL on
 * failure, with the message set: return OPWRAP_ERROR. */
static inline void* opwrap_workspace(opwrap_context* ctx, int64_t nbytes) {
  return ctx->workspace(ctx, nbytes);
}

/* Number of elements of a tensor. */
static inline int64_t opwrap_numel(const opwrap_tensor* t) {
  int64_t n = 1;
  for (int64_t k = 0; k < t->ndim; ++k) n *= t->sizes[k];
  return n;
}

#ifdef __cplusplus
}  /* extern "C" */
#endif

#endif /* OPWRAP_KERNEL_ABI_H */
