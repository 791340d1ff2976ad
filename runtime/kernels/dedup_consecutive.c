/* Kernel of opwrap::dedup_consecutive in plain C (compiled as C, no torch header), behind the
 * C kernel ABI.  The result's length depends on the data ("?n" in the shape rule): the kernel
 * counts the runs, resizes its output (opwrap_resize), then fills it. */
#include "abi/dedup_consecutive.h"

#ifdef __cplusplus
#error "this kernel is C: [tool.codegen] sources compiles .c files with the C compiler"
#endif

#define DEDUP(NAME, T)                                                                  \
  int32_t NAME(opwrap_context* ctx, const opwrap_tensor* self, opwrap_tensor* result) { \
    const T* x = (const T*)self->data;                                                  \
    const int64_t n = opwrap_numel(self);                                               \
    int64_t runs = 0;                                                                   \
    for (int64_t i = 0; i < n; ++i) runs += (i == 0 || x[i] != x[i - 1]);              \
    int32_t status = opwrap_resize(ctx, result, 1, &runs);                              \
    if (status != OPWRAP_OK) return status;                                             \
    T* out = (T*)result->data;                                                          \
    for (int64_t i = 0, j = 0; i < n; ++i)                                              \
      if (i == 0 || x[i] != x[i - 1]) out[j++] = x[i];                                  \
    return OPWRAP_OK;                                                                   \
  }

DEDUP(opwrap_dedup_consecutive_float32, float)
DEDUP(opwrap_dedup_consecutive_float64, double)
DEDUP(opwrap_dedup_consecutive_int32, int32_t)
DEDUP(opwrap_dedup_consecutive_int64, int64_t)
