"""`make bench`: opwrap measured side by side with what it replaces, in one run, as ratios.

Sections: Python call overhead of a generated op on a tiny tensor, against the aten op,
the same op through torch.ops, and the same op written with torch.library.custom_op;
with and without requires_grad.  (Pointwise throughput, per-TU compile seconds and codegen
time join this script as their issues land.)
"""

from __future__ import annotations

import argparse
import sys
import timeit

import torch

import opwrap


@torch.library.custom_op("opwrap_bench::myadd", mutates_args=())
def custom_myadd(self: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
    return torch.add(self, other)


@custom_myadd.register_fake
def _(self, other):
    return torch.empty_like(self)


custom_myadd.register_autograd(lambda ctx, grad: (grad, grad))


def per_call_us(fn, number: int, repeat: int) -> float:
    return min(timeit.repeat(fn, number=number, repeat=repeat)) / number * 1e6


def call_overhead(number: int, repeat: int) -> list[tuple[str, float, float]]:
    rows = []
    for requires_grad in (False, True):
        x = torch.randn(8, requires_grad=requires_grad)
        tag = " (requires_grad)" if requires_grad else ""
        aten = per_call_us(lambda: torch.add(x, x), number, repeat)
        for name, fn in (("opwrap.ops.myadd", lambda: opwrap.ops.myadd(x, x)),
                         ("torch.ops.opwrap.myadd", lambda: torch.ops.opwrap.myadd(x, x)),
                         ("torch.library.custom_op", lambda: custom_myadd(x, x))):
            rows.append((name + tag, per_call_us(fn, number, repeat), aten))
        rows.append(("torch.add" + tag, aten, aten))
    return rows


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer repetitions (a smoke run)")
    args = parser.parse_args(argv)
    number, repeat = (2000, 3) if args.quick else (100000, 7)
    fast = type(opwrap.ops.myadd).__name__ == "builtin_function_or_method"
    print(f"torch {torch.__version__}, {torch.get_num_threads()} threads; fast bindings: {'yes' if fast else 'no'}")
    print("\ncall overhead, 8-element float32 tensor (best of runs)")
    print(f"  {'call':<42}{'us/call':>9}{'vs aten':>9}")
    for name, us, aten in call_overhead(number, repeat):
        print(f"  {name:<42}{us:>9.2f}{us / aten:>8.2f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
