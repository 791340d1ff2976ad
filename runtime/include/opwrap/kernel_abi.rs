//! opwrap's C kernel ABI in Rust: the Rust side of opwrap/kernel_abi.h, for an op library
//! whose kernels are Rust functions (`kernels: {CPU: {abi: rust}}`).  It holds the ABI's
//! `#[repr(C)]` types, safe views of them (TensorRef, TensorMut, TensorList, the arrays,
//! optionals and strings), the Context a kernel gets (errors, output resizing, torch's thread
//! pool, workspace), and `run`, which calls a kernel, returns its error to the op's caller as
//! a RuntimeError and catches a panic at the boundary (a panic never unwinds into C++).
//!
//! It depends on no declaration: `codegen generate` copies it, as it is, beside the op
//! library's bindings (generated/rust/kernel_abi.rs), and generated/rust/kernels.rs, which
//! holds the exported `extern "C"` symbols, brings it in as a module and re-exports it.  It
//! is also a crate root on its own (`rustc --crate-type lib`), as tests/test_rust_runtime.py
//! compiles and tests it.
#![allow(dead_code, unused_unsafe, unused_imports, non_camel_case_types, clippy::all)]

use core::ffi::{c_char, c_void};
use core::marker::PhantomData;
use std::panic::{catch_unwind, resume_unwind, AssertUnwindSafe};
use std::sync::Mutex;

pub const ABI_VERSION: u32 = 1;
pub const OK: i32 = 0;
pub const ERROR: i32 = 1;

// ------------------------------------------------------------------------ the C types
#[repr(C)]
#[derive(Clone, Copy)]
pub struct RawTensor {
    pub data: *mut c_void,
    pub sizes: *const i64,
    pub strides: *const i64,
    pub ndim: i64,
    pub dtype: i32,
    pub device_type: i32,
    pub device_index: i32,
    pub reserved: i32,
    pub handle: *mut c_void,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct RawTensorList {
    pub data: *const RawTensor,
    pub len: i64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct IntArray {
    pub data: *const i64,
    pub len: i64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct FloatArray {
    pub data: *const f64,
    pub len: i64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct Str {
    pub data: *const u8,
    pub len: i64,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct OptionalInt {
    pub value: i64,
    pub present: bool,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct OptionalFloat {
    pub value: f64,
    pub present: bool,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct OptionalBool {
    pub value: bool,
    pub present: bool,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct OptionalDType {
    pub value: i32,
    pub present: bool,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct OptionalIntArray {
    pub data: *const i64,
    pub len: i64,
    pub present: bool,
}

#[repr(C)]
#[derive(Clone, Copy)]
pub struct OptionalStr {
    pub data: *const u8,
    pub len: i64,
    pub present: bool,
}

/// A Python number: `kind` says which field holds it (an int or a bool is also in `as_float`).
#[repr(C)]
#[derive(Clone, Copy, Debug)]
pub struct Scalar {
    pub as_float: f64,
    pub as_int: i64,
    pub kind: i32,
}

impl Scalar {
    pub const FLOAT: i32 = 0;
    pub const INT: i32 = 1;
    pub const BOOL: i32 = 2;
    pub fn to_f64(self) -> f64 {
        self.as_float
    }
    pub fn to_i64(self) -> i64 {
        self.as_int
    }
}

pub type RangeFn = unsafe extern "C" fn(data: *mut c_void, begin: i64, end: i64);

#[repr(C)]
pub struct RawContext {
    pub abi_version: u32,
    pub device_type: i32,
    pub device_index: i32,
    pub num_threads: i32,
    pub stream: *mut c_void,
    pub op: *const c_char,
    pub resize: unsafe extern "C" fn(ctx: *mut RawContext, out: *mut RawTensor, ndim: i64, sizes: *const i64) -> i32,
    pub parallel_for: unsafe extern "C" fn(ctx: *mut RawContext, begin: i64, end: i64, grain: i64, f: RangeFn, data: *mut c_void),
    pub set_error: unsafe extern "C" fn(ctx: *mut RawContext, message: *const c_char, len: i64),
    pub workspace: unsafe extern "C" fn(ctx: *mut RawContext, nbytes: i64) -> *mut c_void,
    pub state: *mut c_void,
}

fn slice_of<'a, T>(data: *const T, len: i64) -> &'a [T] {
    if len <= 0 || data.is_null() {
        &[]
    } else {
        unsafe { core::slice::from_raw_parts(data, len as usize) }
    }
}

fn str_of<'a>(data: *const u8, len: i64) -> &'a str {
    core::str::from_utf8(slice_of(data, len)).expect("a str argument that is not UTF-8")
}

impl IntArray {
    pub fn as_slice<'a>(self) -> &'a [i64] {
        slice_of(self.data, self.len)
    }
}

impl FloatArray {
    pub fn as_slice<'a>(self) -> &'a [f64] {
        slice_of(self.data, self.len)
    }
}

impl Str {
    pub fn as_str<'a>(self) -> &'a str {
        str_of(self.data, self.len)
    }
}

impl OptionalInt {
    pub fn get(self) -> Option<i64> {
        if self.present { Some(self.value) } else { None }
    }
}

impl OptionalFloat {
    pub fn get(self) -> Option<f64> {
        if self.present { Some(self.value) } else { None }
    }
}

impl OptionalBool {
    pub fn get(self) -> Option<bool> {
        if self.present { Some(self.value) } else { None }
    }
}

impl OptionalDType {
    pub fn get(self) -> Option<DType> {
        if self.present { Some(DType(self.value)) } else { None }
    }
}

impl OptionalIntArray {
    pub fn get<'a>(self) -> Option<&'a [i64]> {
        if self.present { Some(slice_of(self.data, self.len)) } else { None }
    }
}

impl OptionalStr {
    pub fn get<'a>(self) -> Option<&'a str> {
        if self.present { Some(str_of(self.data, self.len)) } else { None }
    }
}

// ------------------------------------------------------------------------ dtypes
/// A dtype code: torch's ScalarType values.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct DType(pub i32);

impl DType {
    pub const UINT8: DType = DType(0);
    pub const INT8: DType = DType(1);
    pub const INT16: DType = DType(2);
    pub const INT32: DType = DType(3);
    pub const INT64: DType = DType(4);
    pub const FLOAT16: DType = DType(5);
    pub const FLOAT32: DType = DType(6);
    pub const FLOAT64: DType = DType(7);
    pub const BOOL: DType = DType(11);
    pub const BFLOAT16: DType = DType(15);
}

/// An element type of a tensor view.
pub trait Element: Copy + Send + Sync + 'static {
    const DTYPE: i32;
}

/// The element type of a tensor whose dtype the declaration does not fix: read it through
/// `raw()` after looking at `dtype()`.
#[derive(Clone, Copy)]
pub enum AnyDType {}

/// IEEE half precision, as stored (`to_f32`, `from_f32` convert).
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct Half(pub u16);

/// bfloat16, as stored (`to_f32`, `from_f32` convert, rounding to nearest even).
#[repr(transparent)]
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub struct BFloat16(pub u16);

macro_rules! element {
    ($($t:ty = $code:expr),*) => { $(impl Element for $t { const DTYPE: i32 = $code; })* };
}
element!(u8 = 0, i8 = 1, i16 = 2, i32 = 3, i64 = 4, Half = 5, f32 = 6, f64 = 7, bool = 11, BFloat16 = 15, AnyDType = -1);

impl Half {
    pub fn to_f32(self) -> f32 {
        let h = self.0 as u32;
        let sign = (h & 0x8000) << 16;
        let exp = (h >> 10) & 0x1f;
        let mant = h & 0x3ff;
        if exp == 0 {
            let v = mant as f32 * f32::from_bits(0x3380_0000); // 2^-24
            if sign != 0 { -v } else { v }
        } else if exp == 31 {
            f32::from_bits(sign | 0x7f80_0000 | (mant << 13))
        } else {
            f32::from_bits(sign | ((exp + 112) << 23) | (mant << 13))
        }
    }

    pub fn from_f32(v: f32) -> Half {
        let x = v.to_bits();
        let sign = ((x >> 16) & 0x8000) as u16;
        let exp = ((x >> 23) & 0xff) as i32;
        let mant = x & 0x7f_ffff;
        if exp == 255 {
            return Half(sign | 0x7c00 | if mant != 0 { 0x200 } else { 0 });
        }
        let e = exp - 112;
        if e >= 31 {
            return Half(sign | 0x7c00);
        }
        if e <= 0 {
            if e < -10 {
                return Half(sign);
            }
            let m = mant | 0x80_0000;
            let shift = (14 - e) as u32;
            let rounded = (m + (1 << (shift - 1)) - 1 + ((m >> shift) & 1)) >> shift;
            return Half(sign | rounded as u16);
        }
        let rounded = mant + 0xfff + ((mant >> 13) & 1);
        if rounded & 0x80_0000 != 0 {
            return if e + 1 >= 31 { Half(sign | 0x7c00) } else { Half(sign | (((e + 1) as u16) << 10)) };
        }
        Half(sign | ((e as u16) << 10) | (rounded >> 13) as u16)
    }
}

impl BFloat16 {
    pub fn to_f32(self) -> f32 {
        f32::from_bits((self.0 as u32) << 16)
    }

    pub fn from_f32(v: f32) -> BFloat16 {
        if v.is_nan() {
            return BFloat16(0x7fc0);
        }
        let x = v.to_bits();
        BFloat16(((x + 0x7fff + ((x >> 16) & 1)) >> 16) as u16)
    }
}

/// The arithmetic of float32 and float64, for kernels generic over both.
pub trait Float:
    Element
    + PartialOrd
    + core::ops::Add<Output = Self>
    + core::ops::Sub<Output = Self>
    + core::ops::Mul<Output = Self>
    + core::ops::Div<Output = Self>
    + core::ops::Neg<Output = Self>
{
    fn from_f64(v: f64) -> Self;
    fn to_f64(self) -> f64;
    fn abs(self) -> Self;
}

impl Float for f32 {
    fn from_f64(v: f64) -> Self {
        v as f32
    }
    fn to_f64(self) -> f64 {
        self as f64
    }
    fn abs(self) -> Self {
        f32::abs(self)
    }
}

impl Float for f64 {
    fn from_f64(v: f64) -> Self {
        v
    }
    fn to_f64(self) -> f64 {
        self
    }
    fn abs(self) -> Self {
        f64::abs(self)
    }
}

// ------------------------------------------------------------------------ errors
/// A kernel's refusal: its message reaches Python as "RuntimeError: <op>: message".
#[derive(Debug)]
pub struct Error {
    message: Option<String>, // None: already reported (by a failed resize)
}

impl Error {
    pub fn new(message: impl Into<String>) -> Error {
        Error { message: Some(message.into()) }
    }
}

impl From<String> for Error {
    fn from(message: String) -> Error {
        Error::new(message)
    }
}

impl From<&str> for Error {
    fn from(message: &str) -> Error {
        Error::new(message)
    }
}

pub type Result<T> = core::result::Result<T, Error>;

// ------------------------------------------------------------------------ the call
/// Where the call runs, and torch's thread pool.
pub struct Context {
    raw: *mut RawContext,
}

impl Context {
    fn raw(&self) -> &RawContext {
        unsafe { &*self.raw }
    }

    /// The CUDA device, or -1 on the CPU.
    pub fn device_index(&self) -> i32 {
        self.raw().device_index
    }

    /// torch's intra-op threads (torch.get_num_threads()).
    pub fn num_threads(&self) -> usize {
        self.raw().num_threads.max(1) as usize
    }

    /// CUDA: the device's current cudaStream_t; null on the CPU.
    pub fn stream(&self) -> *mut c_void {
        self.raw().stream
    }

    /// "namespace::name".
    pub fn op(&self) -> &str {
        let op = self.raw().op;
        if op.is_null() { "" } else { unsafe { core::ffi::CStr::from_ptr(op) }.to_str().unwrap_or("") }
    }

    /// f(b, e) over disjoint [b, e) covering [begin, end), on torch's intra-op thread pool
    /// (at::parallel_for), in chunks of at least `grain`.  A panic in f is re-raised here.
    pub fn parallel_for<F: Fn(i64, i64) + Sync>(&self, begin: i64, end: i64, grain: i64, f: F) {
        struct State<'f, F> {
            f: &'f F,
            panic: Mutex<Option<Box<dyn core::any::Any + Send>>>,
        }
        unsafe extern "C" fn trampoline<F: Fn(i64, i64) + Sync>(data: *mut c_void, b: i64, e: i64) {
            let state = unsafe { &*(data as *const State<F>) };
            if let Err(p) = catch_unwind(AssertUnwindSafe(|| (state.f)(b, e))) {
                let mut first = state.panic.lock().unwrap_or_else(|e| e.into_inner());
                if first.is_none() {
                    *first = Some(p);
                }
            }
        }
        let state = State { f: &f, panic: Mutex::new(None) };
        unsafe {
            (self.raw().parallel_for)(self.raw, begin, end, grain, trampoline::<F>, &state as *const State<F> as *mut c_void)
        };
        if let Some(p) = state.panic.into_inner().unwrap_or_else(|e| e.into_inner()) {
            resume_unwind(p);
        }
    }

    /// Scratch memory for `n` elements from torch's allocator, freed when the call returns.
    pub fn workspace<T: Element>(&self, n: usize) -> Result<&mut [T]> {
        let bytes = (n * core::mem::size_of::<T>()) as i64;
        let p = unsafe { (self.raw().workspace)(self.raw, bytes) } as *mut T;
        if p.is_null() {
            return Err(Error { message: None });
        }
        Ok(if n == 0 { &mut [] } else { unsafe { core::slice::from_raw_parts_mut(p, n) } })
    }

    fn set_error(&self, message: &str) {
        unsafe { (self.raw().set_error)(self.raw, message.as_ptr() as *const c_char, message.len() as i64) }
    }
}

fn panic_message(payload: &(dyn core::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "a panic with no message".to_string()
    }
}

/// Runs a kernel: its Result becomes the status, a panic is caught and reported.
pub fn run<F: FnOnce(&Context) -> Result<()>>(ctx: *mut RawContext, f: F) -> i32 {
    let context = Context { raw: ctx };
    match catch_unwind(AssertUnwindSafe(|| f(&context))) {
        Ok(Ok(())) => OK,
        Ok(Err(e)) => {
            if let Some(message) = e.message {
                context.set_error(&message);
            }
            ERROR
        }
        Err(payload) => {
            context.set_error(&format!("the Rust kernel panicked: {}", panic_message(&*payload)));
            ERROR
        }
    }
}

// ------------------------------------------------------------------------ tensor views
fn check_dtype<T: Element>(raw: &RawTensor) {
    assert!(T::DTYPE < 0 || raw.dtype == T::DTYPE, "a tensor of dtype code {} viewed as dtype code {}", raw.dtype, T::DTYPE);
}

fn numel_of(sizes: &[i64]) -> usize {
    sizes.iter().product::<i64>() as usize
}

fn contiguous(sizes: &[i64], strides: &[i64]) -> bool {
    let mut expected = 1;
    for d in (0..sizes.len()).rev() {
        if sizes[d] != 1 && strides[d] != expected {
            return false;
        }
        expected *= sizes[d];
    }
    true
}

fn offset_of(sizes: &[i64], strides: &[i64], index: &[i64]) -> isize {
    assert!(index.len() == sizes.len(), "an index of {} dimensions into a tensor of {}", index.len(), sizes.len());
    let mut offset = 0isize;
    for d in 0..sizes.len() {
        assert!(index[d] >= 0 && index[d] < sizes[d], "index {} out of range for dimension {} of size {}", index[d], d, sizes[d]);
        offset += (index[d] * strides[d]) as isize;
    }
    offset
}

/// The elements of a strided tensor in row-major order, from a linear index on.
pub struct Values<'a, T> {
    base: *const T,
    sizes: &'a [i64],
    strides: &'a [i64],
    index: Vec<i64>,
    offset: isize,
    remaining: usize,
}

impl<'a, T: Copy> Values<'a, T> {
    fn new(base: *const T, sizes: &'a [i64], strides: &'a [i64], start: usize) -> Self {
        let total = numel_of(sizes);
        let mut index = vec![0i64; sizes.len()];
        let mut offset = 0isize;
        let mut rest = start.min(total) as i64;
        for d in (0..sizes.len()).rev() {
            if sizes[d] > 0 {
                index[d] = rest % sizes[d];
                rest /= sizes[d];
                offset += (index[d] * strides[d]) as isize;
            }
        }
        Values { base, sizes, strides, index, offset, remaining: total.saturating_sub(start) }
    }
}

impl<'a, T: Copy> Iterator for Values<'a, T> {
    type Item = T;

    #[inline]
    fn next(&mut self) -> Option<T> {
        if self.remaining == 0 {
            return None;
        }
        let value = unsafe { *self.base.offset(self.offset) };
        self.remaining -= 1;
        if self.remaining > 0 {
            for d in (0..self.sizes.len()).rev() {
                self.index[d] += 1;
                self.offset += self.strides[d] as isize;
                if self.index[d] < self.sizes[d] {
                    break;
                }
                self.offset -= (self.strides[d] * self.sizes[d]) as isize;
                self.index[d] = 0;
            }
        }
        Some(value)
    }
}

/// An input tensor, read only.
#[derive(Clone, Copy)]
pub struct TensorRef<'a, T: Element> {
    raw: &'a RawTensor,
    _t: PhantomData<&'a T>,
}

// Read-only views of memory that outlives the call: shareable with the threads of parallel_for.
unsafe impl<'a, T: Element> Send for TensorRef<'a, T> {}
unsafe impl<'a, T: Element> Sync for TensorRef<'a, T> {}

impl<'a, T: Element> TensorRef<'a, T> {
    /// # Safety
    /// `p` points at a view the wrapper made, alive for the call.
    pub unsafe fn from_raw(p: *const RawTensor) -> Self {
        let raw = unsafe { &*p };
        check_dtype::<T>(raw);
        TensorRef { raw, _t: PhantomData }
    }

    /// # Safety
    /// As `from_raw`; null is an absent `Tensor?`.
    pub unsafe fn from_optional(p: *const RawTensor) -> Option<Self> {
        if p.is_null() { None } else { Some(unsafe { Self::from_raw(p) }) }
    }

    pub fn raw(&self) -> &'a RawTensor {
        self.raw
    }
    pub fn sizes(&self) -> &'a [i64] {
        slice_of(self.raw.sizes, self.raw.ndim)
    }
    pub fn strides(&self) -> &'a [i64] {
        slice_of(self.raw.strides, self.raw.ndim)
    }
    pub fn ndim(&self) -> usize {
        self.raw.ndim as usize
    }
    pub fn numel(&self) -> usize {
        numel_of(self.sizes())
    }
    pub fn dtype(&self) -> DType {
        DType(self.raw.dtype)
    }
    pub fn is_contiguous(&self) -> bool {
        contiguous(self.sizes(), self.strides())
    }
    pub fn as_ptr(&self) -> *const T {
        self.raw.data as *const T
    }
    /// The elements, when the tensor is contiguous.
    pub fn as_slice(&self) -> Option<&'a [T]> {
        if self.is_contiguous() { Some(slice_of(self.as_ptr(), self.numel() as i64)) } else { None }
    }
    /// The element at `index` (one entry per dimension), honouring the strides.
    pub fn get(&self, index: &[i64]) -> T {
        unsafe { *self.as_ptr().offset(offset_of(self.sizes(), self.strides(), index)) }
    }
    /// The elements in row-major order from linear index `start` on, honouring the strides.
    pub fn values_from(&self, start: usize) -> Values<'a, T> {
        Values::new(self.as_ptr(), self.sizes(), self.strides(), start)
    }
}

/// An output, or a tensor written in place.
pub struct TensorMut<'a, T: Element> {
    raw: *mut RawTensor,
    ctx: *mut RawContext,
    _t: PhantomData<&'a mut T>,
}

#[derive(Clone, Copy)]
struct SendPtr<T>(*mut T);
unsafe impl<T> Send for SendPtr<T> {}
unsafe impl<T> Sync for SendPtr<T> {}
impl<T> SendPtr<T> {
    fn get(self) -> *mut T {
        self.0
    }
}

impl<'a, T: Element> TensorMut<'a, T> {
    /// # Safety
    /// `p` points at a view the wrapper made, alive for the call.
    pub unsafe fn from_raw(p: *mut RawTensor, ctx: &Context) -> Self {
        check_dtype::<T>(unsafe { &*p });
        TensorMut { raw: p, ctx: ctx.raw, _t: PhantomData }
    }

    /// # Safety
    /// As `from_raw`; null is an absent `Tensor(a!)?`.
    pub unsafe fn from_optional(p: *mut RawTensor, ctx: &Context) -> Option<Self> {
        if p.is_null() { None } else { Some(unsafe { Self::from_raw(p, ctx) }) }
    }

    fn view(&self) -> &RawTensor {
        unsafe { &*self.raw }
    }
    pub fn sizes(&self) -> &[i64] {
        slice_of(self.view().sizes, self.view().ndim)
    }
    pub fn strides(&self) -> &[i64] {
        slice_of(self.view().strides, self.view().ndim)
    }
    pub fn ndim(&self) -> usize {
        self.view().ndim as usize
    }
    pub fn numel(&self) -> usize {
        numel_of(self.sizes())
    }
    pub fn dtype(&self) -> DType {
        DType(self.view().dtype)
    }
    pub fn is_contiguous(&self) -> bool {
        contiguous(self.sizes(), self.strides())
    }
    pub fn as_mut_ptr(&mut self) -> *mut T {
        self.view().data as *mut T
    }
    /// The elements, when the tensor is contiguous (outputs the wrapper allocates are).
    pub fn as_mut_slice(&mut self) -> Option<&mut [T]> {
        if !self.is_contiguous() {
            return None;
        }
        let n = self.numel();
        if n == 0 {
            return Some(&mut []);
        }
        Some(unsafe { core::slice::from_raw_parts_mut(self.as_mut_ptr(), n) })
    }
    pub fn get(&self, index: &[i64]) -> T {
        unsafe { *(self.view().data as *const T).offset(offset_of(self.sizes(), self.strides(), index)) }
    }
    pub fn set(&mut self, index: &[i64], value: T) {
        let offset = offset_of(self.sizes(), self.strides(), index);
        unsafe { *self.as_mut_ptr().offset(offset) = value }
    }
    /// Gives an output its size once the kernel knows it (a data-dependent shape rule, "?n").
    pub fn resize(&mut self, sizes: &[i64]) -> Result<()> {
        let status = unsafe { ((*self.ctx).resize)(self.ctx, self.raw, sizes.len() as i64, sizes.as_ptr()) };
        if status == OK { Ok(()) } else { Err(Error { message: None }) }
    }
    /// f(start, chunk) over disjoint chunks of the (contiguous) elements, on torch's thread
    /// pool: `chunk` holds elements start.. start + chunk.len().
    pub fn par_chunks_mut<F: Fn(usize, &mut [T]) + Sync>(&mut self, ctx: &Context, grain: usize, f: F) -> Result<()> {
        if !self.is_contiguous() {
            return Err(Error::new("par_chunks_mut needs a contiguous tensor"));
        }
        let n = self.numel() as i64;
        let base = SendPtr(self.as_mut_ptr());
        ctx.parallel_for(0, n, grain.max(1) as i64, |b, e| {
            let chunk = unsafe { core::slice::from_raw_parts_mut(base.get().add(b as usize), (e - b) as usize) };
            f(b as usize, chunk)
        });
        Ok(())
    }
}

/// A `Tensor[]`.
#[derive(Clone, Copy)]
pub struct TensorList<'a, T: Element> {
    raw: &'a [RawTensor],
    _t: PhantomData<&'a T>,
}

unsafe impl<'a, T: Element> Send for TensorList<'a, T> {}
unsafe impl<'a, T: Element> Sync for TensorList<'a, T> {}

impl<'a, T: Element> TensorList<'a, T> {
    /// # Safety
    /// The views the wrapper made, alive for the call.
    pub unsafe fn from_raw(list: RawTensorList) -> Self {
        let raw = slice_of(list.data, list.len);
        for t in raw {
            check_dtype::<T>(t);
        }
        TensorList { raw, _t: PhantomData }
    }
    pub fn len(&self) -> usize {
        self.raw.len()
    }
    pub fn is_empty(&self) -> bool {
        self.raw.is_empty()
    }
    pub fn get(&self, i: usize) -> TensorRef<'a, T> {
        TensorRef { raw: &self.raw[i], _t: PhantomData }
    }
}
