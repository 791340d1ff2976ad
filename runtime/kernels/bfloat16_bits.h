// The rounding of a float to bfloat16 on its bits, shared by the kernels of both targets; it
// includes no torch header.
#pragma once

namespace opwrap::kernels {

// The bfloat16 nearest (ties to even) to a float's bits `u`, in the low 16 bits, as
// c10::BFloat16 rounds a float that is not NaN: for a uint32_t or a GCC vector of them.
template <typename U>
inline U bfloat16_rounded_bits(U u) {
  return (u + 0x7FFFu + ((u >> 16) & 1u)) >> 16;
}

}  // namespace opwrap::kernels
