"""CUDA benchmark: every bundled op against its aten counterpart or the eager composition it
replaces, on one GPU, in one run: bench.py's table (OPS) and targets, timed with CUDA events
(the op and its reference interleaved, medians).  Row-wise reductions report the GB/s they
move beside x.clone()'s.  Run by `make gpu-test` on a machine with a GPU; --check exits 1
when a target is missed."""

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench  # noqa: E402  (bench.py beside this file: the table, Report, op_table)


def cuda_median_ms(fns, runs: int) -> list[float]:
    """Median milliseconds of each function on the GPU, between CUDA events recorded around
    each call, the calls interleaved (a, b, a, b, ...), after one warm-up call each."""
    for fn in fns:
        fn()
    torch.cuda.synchronize()
    events = [[(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(runs)]
              for _ in fns]
    for i in range(runs):
        for fn, evs in zip(fns, events):
            evs[i][0].record()
            fn()
            evs[i][1].record()
    torch.cuda.synchronize()
    return [statistics.median(start.elapsed_time(end) for start, end in evs) for evs in events]


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls, 16x smaller tensors")
    parser.add_argument("--json", default=str(bench.ROOT / "build" / "cuda_bench.json"))
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--op", action="append", metavar="NAME", help="time only this op (repeatable)")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("no CUDA device; nothing to benchmark", file=sys.stderr)
        return 1
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}")
    report = bench.Report()
    bench.op_table(report, *((5, 16) if args.quick else (50, 1)), device="cuda", timer=cuda_median_ms, threads=(None,),
                   ops=set(args.op or ()))
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(dict(torch=torch.__version__, device=torch.cuda.get_device_name(),
                                               rows=report.rows), indent=1) + "\n")
    missed = report.missed()
    print(f"\nwrote {args.json}; targets missed: {len(missed)}" + "".join(f"\n  {bench._where(r)}" for r in missed))
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
