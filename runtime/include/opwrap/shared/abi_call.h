// The C kernel ABI's view of a tensor and one call of a kernel behind it (opwrap/kernel_abi.h),
// one text for both targets: `fill`/`view`/`output` turn a tensor into an `opwrap_tensor`,
// and `Call` is one call's context (its callbacks: resize, parallel_for, set_error,
// workspace), which turns a failed status into the op's RuntimeError.
//
// Torch-free, and not a header of its own: <opwrap/runtime/abi.h> (the ATen target) and
// <opwrap/stable/runtime.h> (the stable target) include it inside their namespace
// opwrap::rt::abi, after <opwrap/kernel_abi.h> and the standard headers it uses (<cstdint>,
// <exception>, <string>, <vector>), with what differs between them defined:
// - `Tensor` and `DeviceType`, the target's types, and `OPWRAP_RT_CHECK(cond, ...)`, its check;
// - `int32_t num_threads()`, the threads a kernel may use;
// - `void resize_output(Tensor&, const int64_t* sizes, int64_t ndim)`;
// - `Tensor allocate_workspace(int32_t device_type, int32_t device_index, int64_t nbytes)`, a byte tensor;
// - `void run_parallel_for(int64_t begin, int64_t end, int64_t grain, opwrap_range_fn, void* data)`;
// - `std::string error_message(const std::exception&)`, an exception's message without backtrace.

inline void fill(opwrap_tensor& v, const Tensor& t) {
  v.data = const_cast<void*>(t.const_data_ptr());
  v.sizes = t.sizes().data();
  v.strides = t.strides().data();
  v.ndim = t.dim();
  v.dtype = static_cast<int32_t>(t.scalar_type());
  v.device_type = static_cast<int32_t>(t.device().type());
  v.device_index = t.device().index();
  v.reserved = 0;
}

// An input: read only, not resizable.
inline opwrap_tensor view(const Tensor& t) {
  opwrap_tensor v;
  fill(v, t);
  v.handle = nullptr;
  return v;
}

// An output: the kernel may resize it (opwrap_resize) when its size depends on the data.
inline opwrap_tensor output(Tensor& t) {
  opwrap_tensor v;
  fill(v, t);
  v.handle = &t;
  return v;
}

// One call of a kernel behind the C ABI: its context, the error it reported, its scratch memory.
class Call {
 public:
  Call(const char* op, DeviceType device_type, int32_t device_index, void* stream = nullptr) : op_(op) {
    ctx_.abi_version = OPWRAP_KERNEL_ABI_VERSION;
    ctx_.device_type = static_cast<int32_t>(device_type);
    ctx_.device_index = device_index;
    ctx_.num_threads = num_threads();
    ctx_.stream = stream;
    ctx_.op = op;
    ctx_.resize = &Call::resize;
    ctx_.parallel_for = &Call::parallel_for;
    ctx_.set_error = &Call::set_error;
    ctx_.workspace = &Call::workspace;
    ctx_.state = this;
  }
  Call(const Call&) = delete;
  Call& operator=(const Call&) = delete;

  opwrap_context* context() { return &ctx_; }

  // The kernel's status: anything but OPWRAP_OK is the op's RuntimeError with the kernel's words.
  void check(int32_t status) {
    OPWRAP_RT_CHECK(status == OPWRAP_OK, op_, ": ",
                    error_.empty() ? "the kernel failed (status " + std::to_string(status) + ") without a message"
                                   : error_);
  }

 private:
  static Call& of(opwrap_context* ctx) { return *static_cast<Call*>(ctx->state); }

  static void set_error(opwrap_context* ctx, const char* message, int64_t len) {
    of(ctx).error_.assign(message, message + (len > 0 ? len : 0));
  }

  // Never throws into the kernel: a failure is the status and the message.
  static int32_t resize(opwrap_context* ctx, opwrap_tensor* out, int64_t ndim, const int64_t* sizes) {
    Call& call = of(ctx);
    try {
      OPWRAP_RT_CHECK(out != nullptr && out->handle != nullptr,
                      "opwrap_resize: only an output the wrapper allocated can be resized");
      OPWRAP_RT_CHECK(ndim >= 0 && (ndim == 0 || sizes != nullptr), "opwrap_resize: ndim ", ndim, " with no sizes");
      Tensor& t = *static_cast<Tensor*>(out->handle);
      resize_output(t, sizes, ndim);
      fill(*out, t);
      return OPWRAP_OK;
    } catch (const std::exception& e) {
      call.error_ = error_message(e);
      return OPWRAP_ERROR;
    }
  }

  // A byte tensor on the call's device, kept until the call returns.
  static void* workspace(opwrap_context* ctx, int64_t nbytes) {
    Call& call = of(ctx);
    try {
      OPWRAP_RT_CHECK(nbytes >= 0, "opwrap_workspace: ", nbytes, " bytes");
      call.scratch_.push_back(allocate_workspace(ctx->device_type, ctx->device_index, nbytes > 0 ? nbytes : 1));
      return call.scratch_.back().mutable_data_ptr();
    } catch (const std::exception& e) {
      call.error_ = error_message(e);
    }
    return nullptr;
  }

  static void parallel_for(opwrap_context*, int64_t begin, int64_t end, int64_t grain, opwrap_range_fn fn,
                           void* data) {
    run_parallel_for(begin, end, grain, fn, data);
  }

  opwrap_context ctx_{};
  const char* op_;
  std::string error_;
  std::vector<Tensor> scratch_;
};
