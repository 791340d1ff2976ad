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
    let loss = move |x: T, y: T| huber_loss(x, y, d, half);
    match (input.as_slice(), target.as_slice()) {
        (Some(x), Some(y)) => result.par_chunks_mut(ctx, GRAIN, |start, out| {
            let n = out.len();
            huber_slices(&x[start..start + n], &y[start..start + n], out, d, half);
        }),
        _ => result.par_chunks_mut(ctx, GRAIN, |start, out| {
            for ((o, a), b) in out.iter_mut().zip(input.values_from(start)).zip(target.values_from(start)) {
                *o = loss(a, b);
            }
        }),
    }
}

#[inline(always)]
fn huber_loss<T: Float>(x: T, y: T, d: T, half: T) -> T {
    let e = x - y;
    let a = e.abs();
    if a <= d { half * e * e } else { d * (a - half * d) }
}

/// The contiguous loop, built once for the baseline target and once with AVX2 and FMA (the
/// same code, vectorized 8 floats wide), chosen at run time with std's feature detection, as
/// torch chooses its own kernels' builds.
fn huber_slices<T: Float>(x: &[T], y: &[T], out: &mut [T], d: T, half: T) {
    #[cfg(target_arch = "x86_64")]
    {
        if std::arch::is_x86_feature_detected!("avx2") && std::arch::is_x86_feature_detected!("fma") {
            // SAFETY: the CPU has the features the function is compiled for.
            return unsafe { huber_slices_avx2(x, y, out, d, half) };
        }
    }
    huber_slices_baseline(x, y, out, d, half)
}

#[inline(always)]
fn huber_slices_baseline<T: Float>(x: &[T], y: &[T], out: &mut [T], d: T, half: T) {
    for ((o, &a), &b) in out.iter_mut().zip(x).zip(y) {
        *o = huber_loss(a, b, d, half);
    }
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2,fma")]
unsafe fn huber_slices_avx2<T: Float>(x: &[T], y: &[T], out: &mut [T], d: T, half: T) {
    huber_slices_baseline(x, y, out, d, half)
}
