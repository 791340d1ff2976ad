// Shared by the hand-written kernels.
#pragma once

#include <cstdint>

namespace opwrap::kernels {

// Elements per parallel chunk (at::internal::GRAIN_SIZE lives in a heavier header).
constexpr int64_t kGrainSize = 32768;

}  // namespace opwrap::kernels
