"""CUDA benchmark: every bundled op against its aten counterpart or the eager composition it
replaces, on one GPU, in one run: bench.py's table (OPS) and targets, timed with CUDA events
(the op and its reference interleaved, medians, the GPU's time).  Row-wise reductions report the GB/s they
move beside x.clone()'s.  Run by `make gpu-test` on a machine with a GPU; --check exits 1
when a target is missed.  With $OPWRAP_TARGET_BUILD set to a stable build's target folder
(`codegen build --target stable --cuda --build-dir B`: B/stable), it times that build's kernels
(scripts/gpu-test's stable half)."""

import argparse
import json
import statistics
import sys
from pathlib import Path

import torch

from opwrap_codegen import build

sys.path.insert(0, str(Path(__file__).resolve().parent))
import bench  # noqa: E402  (bench.py beside this file: the table, Report, op_table)


def cuda_median_ms(fns, runs: int, queued: bool = True) -> list[float]:
    """Median milliseconds of each function on the GPU, between CUDA events recorded around
    each call, the calls interleaved (a, b, a, b, ...), after one warm-up call each.  The GPU's
    time, not the host's: a sleep kernel queued first holds the GPU while the host queues the
    calls, so a call's events time its kernels back to back, not the host launching them (the
    call overhead is bench.py's section; an op that waits for the GPU, e.g. for an output size,
    still includes its wait).  `queued` False: without the sleep (a first estimate)."""
    for fn in fns:
        fn()
    torch.cuda.synchronize()
    events = [[(torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)) for _ in range(runs)]
              for _ in fns]
    if queued:
        torch.cuda._sleep(SLEEP_CYCLES)
    for i in range(runs):
        for fn, evs in zip(fns, events):
            evs[i][0].record()
            fn()
            evs[i][1].record()
    torch.cuda.synchronize()
    return [statistics.median(start.elapsed_time(end) for start, end in evs) for evs in events]


# About 30 ms of an H100's clock: longer than the host takes to queue a batch of small calls.
SLEEP_CYCLES = 60_000_000


# The row-wise sweep: every row-wise op with an aten counterpart over rows x columns from 8 to
# 65,536 each way (tensors up to 1 GiB), in float32, bfloat16 and float16.  Targets: >= 0.95x
# aten everywhere, and >= 80% of x.clone()'s bandwidth where the input holds 64 MiB or more.
SWEEP_ROWS = (8, 2048, 65536)
SWEEP_COLS = (128, 1000, 4096, 16384, 65536)
SWEEP_DTYPES = (torch.float32, torch.bfloat16, torch.float16)
SWEEP_BYTES = 1 << 30
BANDWIDTH_TARGET, BANDWIDTH_FROM = 0.8, 64 << 20


def _sweep_check(case, op, args) -> str | None:
    """Why the op's results differ from the reference computed in float32 (None if they agree),
    within the precision of the inputs' dtype."""
    up = bench._map(lambda t: t.float() if t.is_floating_point() else t, args)
    ours = bench._tensors(bench._call(case, op, args))
    ref = bench._tensors(case.ref(*(case.prep(*up) if case.prep else up)))
    dtype = args[0].dtype
    tol = {torch.float32: (1e-3, 1e-3), torch.bfloat16: (5e-2, 2e-2), torch.float16: (1e-2, 1e-2)}[dtype]
    try:
        for a, b in zip(ours, ref):
            torch.testing.assert_close(a.float(), b.float(), atol=tol[0], rtol=tol[1])
    except AssertionError as e:
        return str(e).strip().splitlines()[0]
    return None


def rowwise_sweep(report: "bench.Report", runs: int, ops: set[str]) -> None:
    report.section("row-wise ops over rows x columns; ratio = aten time / opwrap time; bw = opwrap GB/s / "
                   "x.clone()'s (target >= 80% from 64 MiB)",
                   f"{'opwrap op vs reference':<44}{'dtype':>9}{'rows x cols':>14}{'opwrap ms':>11}{'ref ms':>9}"
                   f"{'ratio':>8}{'bw':>7}")
    for case in bench.OPS:
        if not case.bandwidth or case.target != bench.ATEN or (ops and case.op not in ops):
            continue
        op = bench._resolve(case.op)
        label = f"{case.op} vs {case.reference}"
        if op is None:  # an op this build left out (the stable target's): as op_table skips it
            report.add("rowwise", label, None, skipped="not in torch.ops.opwrap")
            print(f"  {label:<44}  skipped: not in torch.ops.opwrap", flush=True)
            continue
        for dtype in SWEEP_DTYPES:
            dt = str(dtype).replace("torch.", "")
            for rows in SWEEP_ROWS:
                for cols in SWEEP_COLS:
                    if rows * cols * dtype.itemsize > SWEEP_BYTES:
                        continue
                    m = bench.Inputs(dtype, "cuda")
                    m.R, m.C = rows, cols
                    args = case.make(m)
                    ref_args = case.prep(*args) if case.prep else args
                    where = f"{label} ({dt}, {rows}x{cols})"
                    bad = _sweep_check(case, op, args)
                    if bad:
                        report.add("rowwise", f"{where} matches its reference", 0.0, 1.0, mismatch=bad)
                        print(f"  {label:<44}{dt:>9}{f'{rows}x{cols}':>14}  MISMATCH: {bad[:100]}", flush=True)
                        continue
                    out = bench._call(case, op, args)
                    x = args[0]
                    moved = sum(t.nbytes for t in bench._tensors(args) + bench._tensors(out))
                    fns = [lambda: bench._call(case, op, args), lambda: case.ref(*ref_args), x.clone]
                    once = sum(cuda_median_ms([fn], 1, queued=False)[0] for fn in fns)
                    times = cuda_median_ms(fns, max(runs, min(8 * runs, int(300 / max(once, 1e-3)))))
                    ratio = times[1] / times[0]
                    bw = (moved / times[0]) / (2 * x.nbytes / times[2])
                    report.add("rowwise", where, ratio, bench.ATEN, op=case.op, dtype=dt, rows=rows, cols=cols,
                               opwrap_ms=times[0], reference_ms=times[1], bandwidth_of_clone=bw)
                    if x.nbytes >= BANDWIDTH_FROM:
                        report.add("rowwise", f"{where} bandwidth / x.clone()'s", bw, BANDWIDTH_TARGET)
                    miss = ratio < bench.ATEN or (x.nbytes >= BANDWIDTH_FROM and bw < BANDWIDTH_TARGET)
                    print(f"  {label:<44}{dt:>9}{f'{rows}x{cols}':>14}{times[0]:>11.4f}{times[1]:>9.4f}{ratio:>7.2f}x"
                          f"{bw:>6.0%}{'  MISSED' if miss else ''}", flush=True)
                    del args, ref_args, out, fns


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls, 16x smaller tensors")
    parser.add_argument("--json", default=str(bench.ROOT / "build" / "cuda_bench.json"))
    parser.add_argument("--check", action="store_true", help="exit 1 when a target is missed")
    parser.add_argument("--op", action="append", metavar="NAME", help="time only this op (repeatable)")
    parser.add_argument("--part", choices=("table", "sweep", "all"), default="all",
                        help="the op table, the row-wise sweep, or both")
    args = parser.parse_args(argv)
    if not torch.cuda.is_available():
        print("no CUDA device; nothing to benchmark", file=sys.stderr)
        return 1
    built = build.manifest(bench.opwrap.library_path)
    target = built.get("target", "aten")  # $OPWRAP_TARGET_BUILD=build/<dir>/stable: the stable target's build
    print(f"device: {torch.cuda.get_device_name()}, torch {torch.__version__}, {target} target: "
          f"{bench.opwrap.library_path}")
    report = bench.Report()
    if args.part in ("table", "all"):
        bench.op_table(report, *((5, 16) if args.quick else (50, 1)), device="cuda", timer=cuda_median_ms,
                       threads=(None,), ops=set(args.op or ()))
    if args.part in ("sweep", "all"):
        rowwise_sweep(report, 5 if args.quick else 20, set(args.op or ()))
    Path(args.json).parent.mkdir(parents=True, exist_ok=True)
    Path(args.json).write_text(json.dumps(dict(torch=torch.__version__, device=torch.cuda.get_device_name(),
                                               target=target, rows=report.rows), indent=1) + "\n")
    missed = report.missed()
    print(f"\nwrote {args.json}; targets missed: {len(missed)}" + "".join(f"\n  {bench._where(r)}" for r in missed))
    return 1 if args.check and missed else 0


if __name__ == "__main__":
    sys.exit(main())
