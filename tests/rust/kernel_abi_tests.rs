// Unit tests of opwrap's Rust kernel runtime (runtime/include/opwrap/kernel_abi.rs), run by
// tests/test_rust_runtime.py: `rustc --test` on this file with the runtime copied beside it,
// brought in as generated/rust/kernels.rs brings it in.  A fake RawContext stands in for the
// generated wrapper: it records the error message and runs parallel_for's chunks in order.
#[path = "kernel_abi.rs"]
mod kernel_abi;

use core::ffi::{c_char, c_void};
use kernel_abi::*;

struct Recorded {
    error: Option<String>,
    chunks: Vec<(i64, i64)>,
}

unsafe extern "C" fn resize(_: *mut RawContext, _: *mut RawTensor, _: i64, _: *const i64) -> i32 {
    ERROR
}

unsafe extern "C" fn parallel_for(ctx: *mut RawContext, begin: i64, end: i64, grain: i64, f: RangeFn, data: *mut c_void) {
    let mut b = begin;
    while b < end {
        let e = (b + grain).min(end);
        unsafe { ((*((*ctx).state as *mut Recorded)).chunks).push((b, e)) };
        unsafe { f(data, b, e) };
        b = e;
    }
}

unsafe extern "C" fn set_error(ctx: *mut RawContext, message: *const c_char, len: i64) {
    let bytes = unsafe { core::slice::from_raw_parts(message as *const u8, len as usize) };
    unsafe { (*((*ctx).state as *mut Recorded)).error = Some(String::from_utf8(bytes.to_vec()).unwrap()) };
}

unsafe extern "C" fn workspace(_: *mut RawContext, _: i64) -> *mut c_void {
    core::ptr::null_mut()
}

fn context(recorded: &mut Recorded) -> RawContext {
    RawContext {
        abi_version: ABI_VERSION,
        device_type: 0,
        device_index: -1,
        num_threads: 1,
        stream: core::ptr::null_mut(),
        op: c"testlib::op".as_ptr(),
        resize,
        parallel_for,
        set_error,
        workspace,
        state: recorded as *mut Recorded as *mut c_void,
    }
}

fn view<T>(data: &mut [T], sizes: &[i64], strides: &[i64], dtype: i32) -> RawTensor {
    RawTensor {
        data: data.as_mut_ptr() as *mut c_void,
        sizes: sizes.as_ptr(),
        strides: strides.as_ptr(),
        ndim: sizes.len() as i64,
        dtype,
        device_type: 0,
        device_index: -1,
        reserved: 0,
        handle: core::ptr::null_mut(),
    }
}

#[test]
fn run_returns_ok_an_error_or_a_caught_panic() {
    let mut recorded = Recorded { error: None, chunks: vec![] };
    let mut raw = context(&mut recorded);
    assert_eq!(run(&mut raw, |ctx| { assert_eq!(ctx.op(), "testlib::op"); Ok(()) }), OK);
    assert_eq!(run(&mut raw, |_| Err("delta must be positive".into())), ERROR);
    assert_eq!(recorded.error.take().as_deref(), Some("delta must be positive"));
    let mut raw = context(&mut recorded);
    assert_eq!(run(&mut raw, |_| panic!("NaN at the door")), ERROR);
    assert_eq!(recorded.error.take().as_deref(), Some("the Rust kernel panicked: NaN at the door"));
    let mut raw = context(&mut recorded);
    assert_eq!(run(&mut raw, |ctx| ctx.workspace::<f32>(4).map(|_| ())), ERROR);  // reported by the wrapper
    assert_eq!(recorded.error, None);
}

#[test]
fn a_panic_in_a_parallel_chunk_is_caught_at_the_boundary() {
    let mut recorded = Recorded { error: None, chunks: vec![] };
    let mut raw = context(&mut recorded);
    let status = run(&mut raw, |ctx| {
        ctx.parallel_for(0, 10, 4, |b, _| assert!(b != 4, "chunk {b}"));
        Ok(())
    });
    assert_eq!(status, ERROR);
    assert_eq!(recorded.chunks, vec![(0, 4), (4, 8), (8, 10)]);
    assert_eq!(recorded.error.as_deref(), Some("the Rust kernel panicked: chunk 4"));
}

#[test]
fn strided_views_read_in_row_major_order() {
    // A 2x3 float32 tensor stored transposed (strides 1, 2): the elements 0..6 row-major.
    let mut data = [0.0f32, 3.0, 1.0, 4.0, 2.0, 5.0];
    let (sizes, strides) = ([2i64, 3], [1i64, 2]);
    let raw = view(&mut data, &sizes, &strides, DType::FLOAT32.0);
    let t = unsafe { TensorRef::<f32>::from_raw(&raw) };
    assert!(!t.is_contiguous() && t.as_slice().is_none());
    assert_eq!((t.numel(), t.ndim(), t.dtype()), (6, 2, DType::FLOAT32));
    assert_eq!(t.values_from(0).collect::<Vec<_>>(), vec![0.0, 1.0, 2.0, 3.0, 4.0, 5.0]);
    assert_eq!(t.values_from(4).collect::<Vec<_>>(), vec![4.0, 5.0]);
    assert_eq!(t.get(&[1, 2]), 5.0);
    let none = unsafe { TensorRef::<f32>::from_optional(core::ptr::null()) };
    assert!(none.is_none());
}

#[test]
fn outputs_are_written_in_parallel_chunks() {
    let mut recorded = Recorded { error: None, chunks: vec![] };
    let mut raw = context(&mut recorded);
    let mut data = [0i64; 5];
    let (sizes, strides) = ([5i64], [1i64]);
    let mut out = view(&mut data, &sizes, &strides, DType::INT64.0);
    let status = run(&mut raw, |ctx| {
        let mut result = unsafe { TensorMut::<i64>::from_raw(&mut out, ctx) };
        result.par_chunks_mut(ctx, 2, |start, chunk| {
            for (i, x) in chunk.iter_mut().enumerate() {
                *x = (start + i) as i64 * 10;
            }
        })
    });
    assert_eq!(status, OK);
    assert_eq!(data, [0, 10, 20, 30, 40]);
}

#[test]
#[should_panic(expected = "viewed as dtype code 6")]
fn a_view_of_the_wrong_dtype_panics() {
    let mut data = [0i64; 1];
    let raw = view(&mut data, &[1], &[1], DType::INT64.0);
    let _ = unsafe { TensorRef::<f32>::from_raw(&raw) };
}

#[test]
fn arrays_and_optionals() {
    let ints = [3i64, 4];
    assert_eq!(IntArray { data: ints.as_ptr(), len: 2 }.as_slice(), &[3, 4]);
    assert_eq!(IntArray { data: core::ptr::null(), len: 0 }.as_slice(), &[] as &[i64]);
    assert_eq!(OptionalInt { value: 7, present: true }.get(), Some(7));
    assert_eq!(OptionalInt { value: 7, present: false }.get(), None);
    let text = "mean";
    assert_eq!(Str { data: text.as_ptr(), len: 4 }.as_str(), "mean");
}

#[test]
fn half_and_bfloat16_round_trip() {
    for v in [0.0f32, 1.0, -2.5, 65504.0, 6.103515625e-05, 5.960464477539063e-08] {
        assert_eq!(Half::from_f32(v).to_f32(), v, "{v}");
    }
    assert_eq!(Half::from_f32(1.0), Half(0x3c00));
    assert_eq!(Half::from_f32(1e6).to_f32(), f32::INFINITY);
    assert!(Half::from_f32(f32::NAN).to_f32().is_nan());
    assert_eq!(BFloat16::from_f32(1.0), BFloat16(0x3f80));
    assert_eq!(BFloat16::from_f32(-3.0).to_f32(), -3.0);
    assert!(BFloat16::from_f32(f32::NAN).to_f32().is_nan());
}
