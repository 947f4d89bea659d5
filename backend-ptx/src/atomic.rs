//! Atomic read-modify-write and compare-and-swap on global memory.
//!
//! An atomic is `atom.<sem>.<scope>` with the block IR's ordering (`atom.acq_rel.gpu`,
//! acquire-release at device scope, by default, as Triton's), so that atomics can publish
//! and observe other memory writes. Native instructions:
//!
//! | op            | types                                                      |
//! |---------------|------------------------------------------------------------|
//! | `add`         | i32 u32 i64 u64 f32 f64, f16 (`add.noftz.f16`), bf16 on sm_90 |
//! | `max` `min`   | i32 u32 i64 u64 (signed or unsigned by type)               |
//! | `xchg`        | 32- and 64-bit types                                       |
//! | `and or xor`  | 32- and 64-bit integers                                    |
//! | `cas`         | 16-, 32- and 64-bit types                                  |
//!
//! The rest of the 16-, 32- and 64-bit combinations (float `max`/`min` with the IEEE NaN and
//! signed-zero rules, bf16 `add` before sm_90, every op on i16/u16/f16/bf16 that has no
//! instruction) run a compare-and-swap loop: read, combine, `atom.cas`, retry until the word
//! was unchanged (compared bitwise, so NaNs terminate). 8-bit and boolean elements have no
//! atomics in PTX and are rejected.

use crate::emit::{Emitter, Res};
use crate::expr;
use crate::memory::global_addr;
use crate::names::Class;
use rutile_ir::ir::{AtomicOp, AtomicOrder, BinaryOp};
use rutile_ir::thread::{Reg, Stmt, ThreadParam};
use rutile_ir::ScalarType::{self, *};

/// Where an atomic acts: its buffer and element, its predicate and its ordering.
#[derive(Clone, Copy)]
pub(crate) struct Site {
    /// The pointer parameter.
    pub param: u32,
    /// The element index register.
    pub index: Reg,
    /// Where false, the thread does nothing.
    pub pred: Option<Reg>,
    /// The memory ordering and scope.
    pub order: AtomicOrder,
}

impl Site {
    /// The site of atomic statement `s` (an atomic or a compare-and-swap).
    pub fn of(s: &Stmt) -> Site {
        match *s {
            Stmt::Atomic {
                param,
                index,
                pred,
                order,
                ..
            }
            | Stmt::AtomicCas {
                param,
                index,
                pred,
                order,
                ..
            } => Site {
                param,
                index,
                pred,
                order,
            },
            _ => unreachable!("the emitter asks for the sites of atomics only"),
        }
    }
}

/// `atom.<sem>.<scope>.global`, Triton's names being PTX's.
fn atom(order: AtomicOrder) -> String {
    let (sem, scope) = order.names();
    format!("atom.{sem}.{scope}.global")
}

fn elem(e: &Emitter, param: u32) -> ScalarType {
    match e.k.params[param as usize] {
        ThreadParam::Ptr { elem, .. } => elem,
        ThreadParam::Scalar { .. } => unreachable!("verified pointer parameter"),
    }
}

fn reject_bytes(t: ScalarType) -> Res {
    if t.size_bytes() == 1 {
        return Err(format!("PTX has no atomics on 1-byte elements ({t})"));
    }
    Ok(())
}

/// The native `atom` operation for `op` on `t`, if there is one.
fn native(e: &Emitter, op: AtomicOp, t: ScalarType) -> Option<&'static str> {
    Some(match (op, t) {
        (AtomicOp::Add, F32) => "add.f32",
        (AtomicOp::Add, F64) => "add.f64",
        (AtomicOp::Add, I32 | U32) => "add.u32",
        (AtomicOp::Add, I64 | U64) => "add.u64",
        (AtomicOp::Add, F16) => "add.noftz.f16",
        (AtomicOp::Add, BF16) if e.target.has_sm90() => "add.noftz.bf16",
        (AtomicOp::Max, I32) => "max.s32",
        (AtomicOp::Max, U32) => "max.u32",
        (AtomicOp::Max, I64) => "max.s64",
        (AtomicOp::Max, U64) => "max.u64",
        (AtomicOp::Min, I32) => "min.s32",
        (AtomicOp::Min, U32) => "min.u32",
        (AtomicOp::Min, I64) => "min.s64",
        (AtomicOp::Min, U64) => "min.u64",
        (AtomicOp::Xchg, I32 | U32 | F32) => "exch.b32",
        (AtomicOp::Xchg, I64 | U64 | F64) => "exch.b64",
        (AtomicOp::And, I32 | U32) => "and.b32",
        (AtomicOp::And, I64 | U64) => "and.b64",
        (AtomicOp::Or, I32 | U32) => "or.b32",
        (AtomicOp::Or, I64 | U64) => "or.b64",
        (AtomicOp::Xor, I32 | U32) => "xor.b32",
        (AtomicOp::Xor, I64 | U64) => "xor.b64",
        _ => return None,
    })
}

pub(crate) fn rmw(e: &mut Emitter, dst: Reg, op: AtomicOp, site: Site, value: Reg) -> Res {
    let (param, index, pred, order) = (site.param, site.index, site.pred, site.order);
    let t = elem(e, param);
    reject_bytes(t)?;
    if t.is_float() && matches!(op, AtomicOp::And | AtomicOp::Or | AtomicOp::Xor) {
        return Err(format!("`{}` of {t} is not defined", op.name()));
    }
    let (d, v) = (e.r(dst), e.r(value));
    if let Some(i) = native(e, op, t) {
        let addr = global_addr(e, param, index, t.size_bytes());
        let guard = pred.map(|p| e.r(p));
        let atom = atom(order);
        e.guarded(guard, |e| e.ins(format!("{atom}.{i} {d}, [{addr}], {v}")));
        return Ok(());
    }
    let combine = match op {
        AtomicOp::Add => Some(BinaryOp::Add),
        AtomicOp::Max => Some(BinaryOp::Max),
        AtomicOp::Min => Some(BinaryOp::Min),
        AtomicOp::Xchg => None,
        AtomicOp::And => Some(BinaryOp::And),
        AtomicOp::Or => Some(BinaryOp::Or),
        AtomicOp::Xor => Some(BinaryOp::Xor),
    };
    cas_loop(e, t, &d, site, |e, old| {
        let new = e.tmp(Class::of(t));
        match combine {
            Some(op) => expr::binary(e, &new, t, op, old, &v)?,
            None => expr::mov(e, &new, t, &v),
        }
        Ok(new)
    })
}

/// The CAS word: i16/u16 values (32-bit registers) travel as 16-bit words.
fn to_word(e: &mut Emitter, t: ScalarType, v: &str) -> String {
    if matches!(t, I16 | U16) {
        let w = e.tmp(Class::H);
        e.ins(format!("cvt.u16.u32 {w}, {v}"));
        w
    } else {
        v.to_string()
    }
}

fn from_word(e: &mut Emitter, t: ScalarType, d: &str, w: &str) {
    match t {
        I16 => e.ins(format!("cvt.s32.s16 {d}, {w}")),
        U16 => e.ins(format!("cvt.u32.u16 {d}, {w}")),
        _ => expr::mov(e, d, t, w),
    }
}

fn word_class(t: ScalarType) -> Class {
    if matches!(t, I16 | U16) {
        Class::H
    } else {
        Class::of(t)
    }
}

/// `d = old; *addr = combine(old)` atomically, by compare-and-swap until no other thread
/// wrote in between.
fn cas_loop(
    e: &mut Emitter,
    t: ScalarType,
    d: &str,
    site: Site,
    combine: impl FnOnce(&mut Emitter, &str) -> Res<String>,
) -> Res {
    let (param, index, pred, order) = (site.param, site.index, site.pred, site.order);
    let addr = global_addr(e, param, index, t.size_bytes());
    let wc = word_class(t);
    let bits = wc.bits();
    let skip = e.new_label();
    if let Some(p) = pred {
        e.ins(format!("@!{} bra {skip}", e.r(p)));
    }
    let (old, got) = (e.tmp(wc), e.tmp(wc));
    let again = e.tmp(Class::Pred);
    let scope = order.names().1;
    e.ins(format!("ld.relaxed.{scope}.global.{bits} {old}, [{addr}]"));
    let top = e.new_label();
    e.place_label(&top);
    let old_v = if wc == Class::of(t) {
        old.clone()
    } else {
        let v = e.tmp(Class::of(t));
        from_word(e, t, &v, &old);
        v
    };
    let new_v = combine(e, &old_v)?;
    let new_w = to_word(e, t, &new_v);
    e.ins(format!("{}.cas.{bits} {got}, [{addr}], {old}, {new_w}", atom(order)));
    e.ins(format!("setp.ne.{bits} {again}, {got}, {old}"));
    e.ins(format!("mov.{bits} {old}, {got}"));
    e.ins(format!("@{again} bra {top}"));
    from_word(e, t, d, &old);
    e.place_label(&skip);
    Ok(())
}

pub(crate) fn cas(e: &mut Emitter, dst: Reg, site: Site, cmp: Reg, value: Reg) -> Res {
    let (param, index, pred, order) = (site.param, site.index, site.pred, site.order);
    let atom = atom(order);
    let t = elem(e, param);
    reject_bytes(t)?;
    let (d, c, v) = (e.r(dst), e.r(cmp), e.r(value));
    let addr = global_addr(e, param, index, t.size_bytes());
    let guard = pred.map(|p| e.r(p));
    let bits = word_class(t).bits();
    if matches!(t, I16 | U16) {
        let (cw, vw) = (to_word(e, t, &c), to_word(e, t, &v));
        let got = e.tmp(Class::H);
        e.guarded(guard, |e| {
            e.ins(format!("{atom}.cas.b16 {got}, [{addr}], {cw}, {vw}"));
            from_word(e, t, &d, &got);
        });
    } else {
        e.guarded(guard, |e| e.ins(format!("{atom}.cas.{bits} {d}, [{addr}], {c}, {v}")));
    }
    Ok(())
}
