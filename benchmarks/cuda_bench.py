"""CUDA benchmark: each generated CUDA kernel against the aten op that computes the same
thing, on the same GPU, in one run; prints one row per op with the time ratio.
Run by `make gpu-test` on a machine with a GPU."""

import sys

import torch

import opwrap  # noqa: F401
from torch.utils.benchmark import Timer

ops = torch.ops.opwrap


def cases(dtype):
    g = torch.Generator(device="cuda").manual_seed(0)
    r = lambda *s: torch.randn(*s, device="cuda", dtype=dtype, generator=g)
    big, n, k, m = r(1 << 24), 4096, 1024, 1024
    x, w, b = r(n, k), r(m, k), r(m)
    rows, gain = r(8192, 4096), r(4096)
    mat, vec, acc = r(8192, 4096), r(4096), r(8192)
    return {
        "myadd": (lambda: ops.myadd(big, big), lambda: torch.add(big, big)),
        "mul_constant": (lambda: ops.mul_constant(big, 0.5), lambda: torch.mul(big, 0.5)),
        "gelu_tanh": (lambda: ops.gelu_tanh(big), lambda: torch.nn.functional.gelu(big, approximate="tanh")),
        "bias_gelu (vs gelu(x + b))": (lambda: ops.bias_gelu(rows, gain),
                                       lambda: torch.nn.functional.gelu(rows + gain, approximate="tanh")),
        "sincos": (lambda: ops.sincos(big), lambda: (torch.sin(big), torch.cos(big))),
        "linear": (lambda: ops.linear(x, w, b), lambda: torch.nn.functional.linear(x, w, b)),
        "rms_norm": (lambda: ops.rms_norm(rows, gain), lambda: torch.nn.functional.rms_norm(rows, (4096,), gain, 1e-6)),
        "addmv_": (lambda: ops.addmv_(acc, mat, vec), lambda: acc.addmv_(mat, vec)),
        "nonzero_flat": (lambda: ops.nonzero_flat(torch.relu(big)), lambda: torch.nonzero(torch.relu(big).flatten())),
    }


def main():
    if not torch.cuda.is_available():
        print("no CUDA device; nothing to benchmark", file=sys.stderr)
        return 1
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    print(f"{'op':<28}{'dtype':<10}{'opwrap us':>12}{'aten us':>12}{'ratio':>8}")
    for dtype in (torch.float32, torch.bfloat16):
        for name, (ours, theirs) in cases(dtype).items():
            try:
                ours()
            except RuntimeError as e:  # a dtype the op does not declare
                print(f"{name:<28}{str(dtype).replace('torch.', ''):<10}  n/a: {str(e).splitlines()[0][:60]}")
                continue
            t_ours = Timer("f()", globals={"f": ours}).blocked_autorange(min_run_time=0.5).median * 1e6
            t_aten = Timer("f()", globals={"f": theirs}).blocked_autorange(min_run_time=0.5).median * 1e6
            print(f"{name:<28}{str(dtype).replace('torch.', ''):<10}{t_ours:>12.1f}{t_aten:>12.1f}{t_ours / t_aten:>8.2f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
