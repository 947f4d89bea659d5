//! `device_print` through CUDA's `vprintf`: the line's format string is a module-scope
//! constant, the arguments are written to a per-thread local buffer as C's variadic
//! promotions have them (`int`, `unsigned`, 64-bit integers, and `double` for every float
//! type), and the driver prints the buffered lines when the host next synchronizes.
//!
//! Lines read `pid (x, y, z) idx (i, j) prefix: v0, v1`, as the interpreter prints them,
//! except that floats are `%.9g` (`%.17g` for f64) and booleans 0 or 1.

use crate::emit::{Emitter, Res};
use crate::names::Class;
use rutile_ir::thread::Reg;
use rutile_ir::ScalarType::{self, *};
use std::fmt::Write;

/// How one argument goes into the buffer: its `printf` conversion and its size in bytes.
fn conversion(t: ScalarType) -> (&'static str, u32) {
    match t {
        Bool | I8 | I16 | I32 => ("%d", 4),
        U8 | U16 | U32 => ("%u", 4),
        I64 => ("%lld", 8),
        U64 => ("%llu", 8),
        F64 => ("%.17g", 8),
        F8E4M3 | F8E5M2 | F8E4M3B15 | F8E4M3Fnuz | F8E5M2Fnuz | F16 | BF16 | F32 => ("%.9g", 8),
    }
}

/// `prefix` where `printf` reads it literally.
fn escaped(prefix: &str) -> String {
    prefix.replace('%', "%%")
}

/// The bytes of a PTX `.b8` array initializer, with the terminating zero.
pub(crate) fn format_bytes(text: &str) -> String {
    let mut out: Vec<String> = text.bytes().map(|b| b.to_string()).collect();
    out.push("0".into());
    out.join(", ")
}

pub(crate) fn print(
    e: &mut Emitter,
    prefix: &str,
    coords: &[Reg],
    values: &[Reg],
    pred: Option<Reg>,
    program: Option<[Reg; 3]>,
) -> Res {
    // The format, and where each argument lies in the buffer.
    let mut format = String::from("pid (%d, %d, %d)");
    // (offset, size) of each argument: the three program ids first.
    let mut layout: Vec<(u32, u32)> = vec![(0, 4), (4, 4), (8, 4)];
    let mut at = 12u32;
    let mut place = |size: u32, layout: &mut Vec<(u32, u32)>| {
        at = at.div_ceil(size) * size;
        layout.push((at, size));
        at += size;
    };
    if values.is_empty() {
        let _ = write!(format, " {}", escaped(prefix));
    } else {
        let idx: Vec<&str> = coords.iter().map(|_| "%d").collect();
        let _ = write!(format, " idx ({}) {}:", idx.join(", "), escaped(prefix));
        for _ in coords {
            place(4, &mut layout);
        }
        let mut sep = " ";
        for &v in values {
            let (conv, size) = conversion(e.ty(v));
            let _ = write!(format, "{sep}{conv}");
            sep = ", ";
            place(size, &mut layout);
        }
    }
    format.push('\n');
    let bytes = at.div_ceil(8) * 8;
    let (fmt, buf) = e.print_format(&format, bytes);

    let skip = e.new_label();
    if let Some(p) = pred {
        e.ins(format!("@!{} bra {skip}", e.r(p)));
    }
    let mut slot = layout.into_iter();
    for (a, axis) in ["x", "y", "z"].into_iter().enumerate() {
        let (offset, _) = slot.next().expect("three program ids");
        let r = match program {
            Some(p) => e.r(p[a]),
            None => {
                let r = e.tmp(Class::R);
                e.ins(format!("mov.u32 {r}, %ctaid.{axis}"));
                r
            }
        };
        e.ins(format!("st.local.u32 [{buf}+{offset}], {r}"));
    }
    if !values.is_empty() {
        for &c in coords {
            let (offset, _) = slot.next().expect("a slot per coordinate");
            e.ins(format!("st.local.u32 [{buf}+{offset}], {}", e.r(c)));
        }
        for &v in values {
            let (offset, _) = slot.next().expect("a slot per value");
            store_value(e, &buf, offset, v);
        }
    }
    let (g, l, fa, la) = (e.tmp(Class::Rd), e.tmp(Class::Rd), e.tmp(Class::Rd), e.tmp(Class::Rd));
    e.ins(format!("mov.u64 {g}, {fmt}"));
    e.ins(format!("cvta.global.u64 {fa}, {g}"));
    e.ins(format!("mov.u64 {l}, {buf}"));
    e.ins(format!("cvta.local.u64 {la}, {l}"));
    e.raw("{");
    e.ins(".param .b64 print_param_0");
    e.ins(format!("st.param.b64 [print_param_0], {fa}"));
    e.ins(".param .b64 print_param_1");
    e.ins(format!("st.param.b64 [print_param_1], {la}"));
    e.ins(".param .b32 print_retval");
    // Not `call.uni`: threads that own no element have branched around the call.
    e.ins("call (print_retval), vprintf, (print_param_0, print_param_1)");
    e.raw("}");
    e.place_label(&skip);
    Ok(())
}

/// Writes register `v` at `buf + offset` as its C variadic promotion.
fn store_value(e: &mut Emitter, buf: &str, offset: u32, v: Reg) {
    let t = e.ty(v);
    let r = e.r(v);
    match t {
        Bool => {
            let x = e.tmp(Class::R);
            e.ins(format!("selp.u32 {x}, 1, 0, {r}"));
            e.ins(format!("st.local.u32 [{buf}+{offset}], {x}"));
        }
        I8 | I16 | I32 | U8 | U16 | U32 => e.ins(format!("st.local.u32 [{buf}+{offset}], {r}")),
        I64 | U64 => e.ins(format!("st.local.u64 [{buf}+{offset}], {r}")),
        F64 => e.ins(format!("st.local.f64 [{buf}+{offset}], {r}")),
        F8E4M3 | F8E5M2 | F8E4M3B15 | F8E4M3Fnuz | F8E5M2Fnuz | F16 | BF16 | F32 => {
            let f = crate::cast::widen(e, &r, t);
            let d = e.tmp(Class::Fd);
            e.ins(format!("cvt.f64.f32 {d}, {f}"));
            e.ins(format!("st.local.f64 [{buf}+{offset}], {d}"));
        }
    }
}
