// CUDA kernels of opwrap::embedding_bag_sum and its backward against torch's stable API.
// Forward: a thread per (bag, column), summing the bag's rows in the math type.  Backward: a
// thread per (bag, column) adding its gradient into a math-type accumulator with atomicAdd,
// then a pass converting it to the result's dtype (the full target's kernels sort the
// indices for a deterministic sum; these are the plain form).
#pragma once

#include "common.cuh"
#include "embedding_bag.h"

namespace opwrap::kernels {

template <typename scalar_t, typename index_t>
struct EmbeddingBagSumStable {
  const scalar_t* w;
  const index_t* idx;
  const index_t* off;
  scalar_t* out;
  int64_t B, D, N;
  __device__ void operator()(int64_t e) const {
    const int64_t b = e / D, d = e % D;
    int64_t start = 0, stop = 0;
    bag_range(off, b, B, N, start, stop);
    bag_acc_t<scalar_t> acc = 0;
    for (int64_t i = start; i < stop; ++i) acc += static_cast<bag_acc_t<scalar_t>>(w[static_cast<int64_t>(idx[i]) * D + d]);
    out[e] = static_cast<scalar_t>(acc);
  }
};

template <typename scalar_t, typename index_t>
void embedding_bag_sum_cuda(const torch::stable::Tensor& weight, const torch::stable::Tensor& indices,
                            const torch::stable::Tensor& offsets, torch::stable::Tensor& result) {
  const int64_t B = offsets.size(0), D = weight.size(1), N = indices.size(0);
  stable::launch_elementwise(weight, B * D, EmbeddingBagSumStable<scalar_t, index_t>{
      weight.const_data_ptr<scalar_t>(), indices.const_data_ptr<index_t>(), offsets.const_data_ptr<index_t>(),
      result.mutable_data_ptr<scalar_t>(), B, D, N});
}

template <typename scalar_t, typename index_t>
struct EmbeddingBagScatterStable {
  const scalar_t* g;
  const index_t* idx;
  const index_t* off;
  bag_acc_t<scalar_t>* acc;
  int64_t B, D, N;
  __device__ void operator()(int64_t e) const {
    const int64_t b = e / D, d = e % D;
    int64_t start = 0, stop = 0;
    bag_range(off, b, B, N, start, stop);
    const auto value = static_cast<bag_acc_t<scalar_t>>(g[e]);
    for (int64_t i = start; i < stop; ++i) atomicAdd(acc + static_cast<int64_t>(idx[i]) * D + d, value);
  }
};

template <typename scalar_t>
struct EmbeddingBagStoreStable {
  const bag_acc_t<scalar_t>* acc;
  scalar_t* out;
  __device__ void operator()(int64_t e) const { out[e] = static_cast<scalar_t>(acc[e]); }
};

template <typename scalar_t, typename index_t>
void embedding_bag_sum_backward_cuda(const torch::stable::Tensor& grad_output, const torch::stable::Tensor& indices,
                                     const torch::stable::Tensor& offsets, int64_t num_weights,
                                     torch::stable::Tensor& result) {
  using acc_t = bag_acc_t<scalar_t>;
  const int64_t B = offsets.size(0), D = grad_output.size(1), N = indices.size(0);
  const int32_t cuda = static_cast<int32_t>(torch::headeronly::DeviceType::CUDA);
  torch::stable::Tensor acc = opwrap::rt::abi::allocate_workspace(
      cuda, grad_output.get_device_index(), std::max<int64_t>(1, num_weights * D) * static_cast<int64_t>(sizeof(acc_t)));
  torch::stable::zero_(acc);
  auto* a = static_cast<acc_t*>(acc.mutable_data_ptr());
  stable::launch_elementwise(grad_output, B * D, EmbeddingBagScatterStable<scalar_t, index_t>{
      grad_output.const_data_ptr<scalar_t>(), indices.const_data_ptr<index_t>(), offsets.const_data_ptr<index_t>(),
      a, B, D, N});
  stable::launch_elementwise(grad_output, num_weights * D, EmbeddingBagStoreStable<scalar_t>{
      a, result.mutable_data_ptr<scalar_t>()});
}

}  // namespace opwrap::kernels
