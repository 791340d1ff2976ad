// opwrap::TensorQueue, the thread-safe tensor queue of the PT2 custom-class guide (seed 000,
// copied there from fbgemm).  Declared in declarations/tensor_queue.yaml, which generates its
// TorchBind binding, __obj_flatten__, pickling and fake class.
#pragma once

#include <ATen/core/Dict.h>
#include <ATen/core/Tensor.h>
#include <ATen/core/ivalue.h>
#include <ATen/ops/scalar_tensor.h>
#include <c10/util/irange.h>
#include <torch/custom_class.h>

#include <deque>
#include <mutex>
#include <string>
#include <vector>

namespace opwrap::kernels {

struct TensorQueue : torch::CustomClassHolder {
  explicit TensorQueue(at::Tensor init_tensor) : init_tensor_(std::move(init_tensor)) {}

  // From serialize()'s state: the pickling constructor.
  explicit TensorQueue(c10::Dict<std::string, at::Tensor> state) {
    init_tensor_ = state.at("init_tensor");
    const int64_t n = state.at("queue/size").item<int64_t>();
    for (const auto i : c10::irange(n)) {
      queue_.push_back(state.at("queue/" + std::to_string(i)));
    }
  }

  c10::Dict<std::string, at::Tensor> serialize() const {
    std::lock_guard<std::mutex> guard(mutex_);
    c10::Dict<std::string, at::Tensor> state;
    state.insert("init_tensor", init_tensor_);
    state.insert("queue/size", at::scalar_tensor(static_cast<int64_t>(queue_.size()), at::kLong));
    for (const auto i : c10::irange(queue_.size())) {
      state.insert("queue/" + std::to_string(i), queue_[i]);
    }
    return state;
  }

  void push(at::Tensor x) {
    std::lock_guard<std::mutex> guard(mutex_);
    queue_.push_back(std::move(x));
  }

  at::Tensor pop() {
    std::lock_guard<std::mutex> guard(mutex_);
    if (queue_.empty()) return init_tensor_;
    at::Tensor front = queue_.front();
    queue_.pop_front();
    return front;
  }

  at::Tensor top() {
    std::lock_guard<std::mutex> guard(mutex_);
    return queue_.empty() ? init_tensor_ : queue_.front();
  }

  int64_t size() {
    std::lock_guard<std::mutex> guard(mutex_);
    return static_cast<int64_t>(queue_.size());
  }

  std::vector<at::Tensor> get_raw_queue() {
    std::lock_guard<std::mutex> guard(mutex_);
    return std::vector<at::Tensor>(queue_.begin(), queue_.end());
  }

  c10::intrusive_ptr<TensorQueue> clone_queue() {
    std::lock_guard<std::mutex> guard(mutex_);
    auto copy = c10::make_intrusive<TensorQueue>(init_tensor_.clone());
    for (const auto& t : queue_) copy->queue_.push_back(t.clone());
    return copy;
  }

  void for_each_add_(at::Tensor inc) {
    std::lock_guard<std::mutex> guard(mutex_);
    for (auto& t : queue_) t.add_(inc);
  }

  at::Tensor init_tensor() const { return init_tensor_; }

 private:
  std::deque<at::Tensor> queue_;
  mutable std::mutex mutex_;
  at::Tensor init_tensor_;
};

}  // namespace opwrap::kernels
