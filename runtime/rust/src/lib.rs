//! opwrap's kernels written in Rust.  Each is a plain function with the signature the
//! generated bindings (generated/rust/kernels.rs) call it with: the wrapper has already
//! checked the arguments, dispatched on the dtype and allocated the outputs from the shape
//! rule; the function only computes.  Its `Err` reaches Python as a RuntimeError naming the
//! op, and so does a panic, caught at the boundary.

#[path = "../../../generated/rust/kernels.rs"]
mod kernels;

use kernels::{Context, Float, Result, TensorMut, TensorRef};

/// Elements per chunk of torch's thread pool (at::internal::GRAIN_SIZE).
const GRAIN: usize = 32768;

/// `fill_natural(int[] size) -> Tensor`: 0, 1, 2, ... in row-major order (seed 001).
fn fill_natural(ctx: &Context, _size: &[i64], mut result: TensorMut<'_, i64>) -> Result<()> {
    result.par_chunks_mut(ctx, GRAIN, |start, chunk| {
        for (i, x) in chunk.iter_mut().enumerate() {
            *x = (start + i) as i64;
        }
    })
}

/// `huber(Tensor input, Tensor target, float delta=1.0) -> Tensor`, for float32 and float64.
/// `contiguous: false`: the inputs come with their own strides; the result is contiguous.
fn huber<T: Float>(
    ctx: &Context,
    input: TensorRef<'_, T>,
    target: TensorRef<'_, T>,
    delta: f64,
    mut result: TensorMut<'_, T>,
) -> Result<()> {
    if !(delta > 0.0) {
        return Err(format!("delta must be positive, got {delta}").into());
    }
    let (d, half) = (T::from_f64(delta), T::from_f64(0.5));
    let loss = move |x: T, y: T| {
        let e = x - y;
        let a = e.abs();
        if a <= d { half * e * e } else { d * (a - half * d) }
    };
    match (input.as_slice(), target.as_slice()) {
        (Some(x), Some(y)) => result.par_chunks_mut(ctx, GRAIN, |start, out| {
            let n = out.len();
            for ((o, &a), &b) in out.iter_mut().zip(&x[start..start + n]).zip(&y[start..start + n]) {
                *o = loss(a, b);
            }
        }),
        _ => result.par_chunks_mut(ctx, GRAIN, |start, out| {
            for ((o, a), b) in out.iter_mut().zip(input.values_from(start)).zip(target.values_from(start)) {
                *o = loss(a, b);
            }
        }),
    }
}
