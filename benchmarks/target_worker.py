"""One side of `make bench`'s `targets` section (benchmarks/bench.py, `two_targets`): the
bundled library as one target built it, in a process of its own (both register the namespace
`opwrap`, so they cannot share one), timing what the parent asks, one JSON line per request.

    python benchmarks/target_worker.py aten|stable

The stable side sets $OPWRAP_TARGET_BUILD to build/stable, so that `import opwrap` loads the
Python that `codegen build --target stable` generated there, and with it build/stable's library,
that target's fake kernels, wrappers and Python autograd."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def serve(target: str) -> None:
    if target == "stable":  # `import opwrap` loads build/stable's generated Python and library
        os.environ["OPWRAP_TARGET_BUILD"] = str(ROOT / "build" / "stable")
    import torch

    import bench  # after the stable tree is in place: bench imports opwrap
    import opwrap
    assert (Path(opwrap.library_path).parent.name == "stable") == (target == "stable"), opwrap.library_path
    for line in sys.stdin:
        req = json.loads(line)
        if req["kind"] == "ops":
            reply = {"ops": list(opwrap.OPS)}
        elif req["kind"] == "time":
            case = bench.OPS[req["case"]]
            torch.set_num_threads(req["threads"])
            args = case.make(bench.Inputs(getattr(torch, req["dtype"]), "cpu", req["scale"]))
            op = bench._resolve(case.op)
            try:  # an op refusing a dtype (its check's RuntimeError) is a skip, as in bench's ops section
                out = bench._tensors(bench._call(case, op, bench._map(torch.clone, args)))
            except RuntimeError as e:
                reply = {"skip": str(e).splitlines()[0]}
            else:
                (ms,) = bench.median_ms((lambda: bench._call(case, op, args),), req["runs"])
                reply = {"ms": ms, "sums": [t.double().sum().item() for t in out]}
        elif req["kind"] == "autocast_calls":  # myadd (autocast: promote) under a bfloat16 autocast
            a, b = torch.randn(16), torch.randn(16).to(getattr(torch, req["dtype"]))  # bfloat16: one input cast
            with torch.inference_mode(), torch.autocast("cpu", dtype=torch.bfloat16):
                reply = {"us": bench.per_call_us(lambda: torch.ops.opwrap.myadd(a, b), req["number"], req["repeat"])}
        else:  # call overhead of mul_constant on 8 elements
            x = torch.randn(8, requires_grad=req["grad"])
            reply = {"us": bench.per_call_us(lambda: opwrap.ops.mul_constant(x, 0.5), req["number"], req["repeat"])}
        print(json.dumps(reply), flush=True)


if __name__ == "__main__":
    serve(sys.argv[1])
