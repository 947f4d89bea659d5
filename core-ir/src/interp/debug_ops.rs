//! `device_assert` and `device_print` in the interpreter (so that `RUTILE_DEVICE=cpu` and
//! the bounds-checked mode check and print), and the lines the SIMT simulator prints for
//! lowered `device_print`s.
//!
//! Printed lines go to stdout, or to the buffer of [`capture_prints`] on the calling thread
//! while it runs (tests read them there).

use super::error::{Fault, FaultKind};
use super::tensor::{Data, Tensor};
use std::cell::RefCell;

thread_local! {
    /// The lines printed while [`capture_prints`] runs on this thread.
    static CAPTURED: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Runs `f`, collecting what `device_print` prints on this thread meanwhile instead of
/// writing it to stdout; returns `f`'s result and the text.
pub fn capture_prints<R>(f: impl FnOnce() -> R) -> (R, String) {
    let outer = CAPTURED.with(|c| c.borrow_mut().replace(String::new()));
    let r = f();
    let text = CAPTURED
        .with(|c| std::mem::replace(&mut *c.borrow_mut(), outer))
        .unwrap_or_default();
    (r, text)
}

/// Prints `text` (lines [`capture_prints`] collected) where this thread's prints go now:
/// to stdout, or to an enclosing [`capture_prints`].
pub fn print_captured(text: &str) {
    for line in text.lines() {
        emit(line);
    }
}

/// Whether [`capture_prints`] runs on this thread.
pub(crate) fn capturing() -> bool {
    CAPTURED.with(|c| c.borrow().is_some())
}

/// Starts collecting this thread's prints, for a launching thread whose [`capture_prints`]
/// should see them (the threads of a cluster's programs): [`take_captured`] takes them.
pub(crate) fn begin_capture() {
    CAPTURED.with(|c| *c.borrow_mut() = Some(String::new()));
}

/// The lines collected on this thread since the last call (empty when not collecting).
pub(crate) fn take_captured() -> String {
    CAPTURED.with(|c| c.borrow_mut().as_mut().map(std::mem::take).unwrap_or_default())
}

/// Adds lines collected on other threads to this thread's [`capture_prints`], if it runs.
pub(crate) fn append_captured(text: &str) {
    CAPTURED.with(|c| {
        if let Some(s) = c.borrow_mut().as_mut() {
            s.push_str(text);
        }
    });
}

fn emit(line: &str) {
    let captured = CAPTURED.with(|c| match c.borrow_mut().as_mut() {
        Some(s) => {
            s.push_str(line);
            s.push('\n');
            true
        }
        None => false,
    });
    if !captured {
        println!("{line}");
    }
}

/// The first element of `cond` that fails, as an [`FaultKind::AssertionFailed`] fault
/// naming the element's index and `message`.
pub(crate) fn check(cond: &Tensor, message: &str) -> Result<(), Fault> {
    let failed = cond.bools()?.iter().position(|&b| !b);
    match failed {
        None => Ok(()),
        Some(i) => Err(Fault {
            kind: FaultKind::AssertionFailed,
            message: format!(
                "device_assert failed at element ({}): {message}",
                index(cond.ty.shape.dims(), i).join(", ")
            ),
        }),
    }
}

/// The multi-index of element `i` (row-major) of a block of `dims`.
pub(crate) fn index(dims: &[u32], mut i: usize) -> Vec<String> {
    let mut idx = vec![0usize; dims.len()];
    for (d, &n) in idx.iter_mut().zip(dims).rev() {
        *d = i % n as usize;
        i /= n as usize;
    }
    idx.iter().map(|d| d.to_string()).collect()
}

/// A value as `device_print` writes it in the interpreter: booleans `true` or `false`,
/// integers in decimal, floats (any width, held exactly as an `f64`) as Rust's `{:?}`.
pub enum PrintValue {
    /// A boolean, printed `true` or `false`.
    Bool(bool),
    /// An integer of any type (an `i128` holds every `i64` and `u64`), printed in decimal.
    Int(i128),
    /// A float of any type, held exactly, printed as Rust's `{:?}` of the `f64`.
    Float(f64),
}

/// `v` as the interpreter prints it.
pub fn print_value(v: PrintValue) -> String {
    match v {
        PrintValue::Bool(b) => b.to_string(),
        PrintValue::Int(i) => i.to_string(),
        PrintValue::Float(f) => format!("{f:?}"),
    }
}

/// Element `i` of `data`, of type `ty` where known, as `device_print` writes it (a `u64`
/// above `i64::MAX`, held as its bits, as the unsigned number it is).
pub(crate) fn element(data: &Data, i: usize, ty: Option<crate::ScalarType>) -> String {
    match data {
        Data::Bool(v) => print_value(PrintValue::Bool(v[i])),
        Data::Int(v) if ty == Some(crate::ScalarType::U64) => print_value(PrintValue::Int(v[i] as u64 as i128)),
        Data::Int(v) => print_value(PrintValue::Int(v[i] as i128)),
        Data::Float(v) => print_value(PrintValue::Float(v[i])),
        Data::Ptr(v) => format!("ptr({}, {})", v[i].param, v[i].offset),
    }
}

/// One printed line: `pid (x, y, z) idx (i, j) prefix: v0, v1` (without values,
/// `pid (x, y, z) prefix`), to stdout or to [`capture_prints`]. Public for backends that
/// print their kernels' lines from the host (Vulkan's print buffer), so that every device
/// prints the interpreter's lines; values as [`print_value`] writes them.
pub fn print_line(pid: [u32; 3], idx: &[String], prefix: &str, values: &[String]) {
    if values.is_empty() {
        emit(&format!("pid ({}, {}, {}) {prefix}", pid[0], pid[1], pid[2]));
        return;
    }
    emit(&format!(
        "pid ({}, {}, {}) idx ({}) {prefix}: {}",
        pid[0],
        pid[1],
        pid[2],
        idx.join(", "),
        values.join(", ")
    ));
}

/// Prints a line per element of `values` (one shape), as Triton's `device_print` does.
pub(crate) fn print(pid: [u32; 3], prefix: &str, values: &[&Tensor]) {
    let Some(first) = values.first() else {
        print_line(pid, &[], prefix, &[]);
        return;
    };
    let dims = first.ty.shape.dims();
    for i in 0..first.data.len() {
        let vals: Vec<String> = values.iter().map(|t| element(&t.data, i, t.ty.scalar_type())).collect();
        print_line(pid, &index(dims, i), prefix, &vals);
    }
}
