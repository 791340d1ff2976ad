"""A short tour of the bundled ops (run by `make demo`)."""

import torch

import opwrap

ops = torch.ops.opwrap
print(f"loaded {opwrap.library_path}: {', '.join(opwrap.OPS)}")

a, b = torch.arange(4.0), torch.full((4,), 10.0)
print("myadd(a, b)              =", ops.myadd(a, b))
print("mul_constant(a, 2.5)     =", ops.mul_constant(a, 2.5))
# Generated from `pointwise:` expressions: broadcasting and type promotion as aten's ops.
print("myadd(a[:2, None], arange(3)) =", ops.myadd(a[:2, None], torch.arange(3)))
print("bias_gelu(x, bias)       =", ops.bias_gelu(torch.linspace(-2, 2, 6).reshape(2, 3), torch.tensor([0.0, 1.0, -1.0])))
x, w, bias = torch.ones(2, 3), torch.arange(6.0).reshape(2, 3), torch.tensor([0.5, -0.5])
print("linear(x, w, bias)       =", ops.linear(x, w, bias))
y = torch.ones(2)
ops.addmv_(y, w, torch.ones(3), beta=2, alpha=1)
print("addmv_(ones, w, ones, beta=2) ->", y)
print("fill_natural([2, 3])     =", ops.fill_natural([2, 3]))
# Index tensors beside float data, a dtype argument, an out= overload, tensor lists.
table = torch.arange(8.0).reshape(4, 2)
print("embedding_bag_sum(table, int32 indices, offsets) =",
      ops.embedding_bag_sum(table, torch.tensor([0, 3, 1], dtype=torch.int32), torch.tensor([0, 2], dtype=torch.int32)))
print("to_dtype(a, torch.int64)  =", ops.to_dtype(a, torch.int64))
out = torch.empty(0)
ops.myadd(a, b, out=out)
print("myadd(a, b, out=out)      -> out resized to", tuple(out.shape))
print("cat_rows([w, x]).shape    =", tuple(ops.cat_rows([w, x]).shape))
try:
    ops.linear(x, torch.ones(2, 4))
except RuntimeError as e:
    print("a bad shape is a clear error:", str(e).splitlines()[0])
