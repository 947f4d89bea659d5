//! Structured control flow as labels and branches.
//!
//! `if c { A } else { B }` becomes `@!c bra ELSE; A; bra END; ELSE: B; END:` and
//! `while { C } c { B }` becomes `TOP: C; @!c bra EXIT; B; bra TOP; EXIT:`. The block IR's
//! control flow is uniform across a program's threads, so barriers inside are fine.
//! A warp-specialized statement branches on the thread index, uniformly within each warp:
//! `p = tid < consumers; @!p bra PRODUCER; CONSUMER; bra END; PRODUCER: P; END:`.

use crate::emit::Emitter;
use crate::names::Class;
use crate::PtxError;
use rutile_ir::thread::{Reg, Stmt};

pub(crate) fn if_(e: &mut Emitter, cond: Reg, then_body: &[Stmt], else_body: &[Stmt]) -> Result<(), PtxError> {
    let c = e.r(cond);
    let end = e.new_label();
    if else_body.is_empty() {
        e.ins(format!("@!{c} bra {end}"));
        e.nested(then_body)?;
    } else {
        let els = e.new_label();
        e.ins(format!("@!{c} bra {els}"));
        e.nested(then_body)?;
        e.ins(format!("bra.uni {end}"));
        e.place_label(&els);
        e.nested(else_body)?;
    }
    e.place_label(&end);
    Ok(())
}

pub(crate) fn while_(e: &mut Emitter, cond_body: &[Stmt], cond: Reg, body: &[Stmt]) -> Result<(), PtxError> {
    let top = e.new_label();
    let exit = e.new_label();
    e.place_label(&top);
    e.nested(cond_body)?;
    e.ins(format!("@!{} bra {exit}", e.r(cond)));
    e.nested(body)?;
    e.ins(format!("bra.uni {top}"));
    e.place_label(&exit);
    Ok(())
}

pub(crate) fn specialized(e: &mut Emitter, producer: &[Stmt], consumer: &[Stmt]) -> Result<(), PtxError> {
    let consumers = e.k.num_warps * e.k.warp_size;
    let tid = e.tmp(Class::R);
    e.ins(format!("mov.u32 {tid}, %tid.x"));
    let is_consumer = e.tmp(Class::Pred);
    e.ins(format!("setp.lt.u32 {is_consumer}, {tid}, {consumers}"));
    let producer_at = e.new_label();
    let end = e.new_label();
    e.ins(format!("@!{is_consumer} bra {producer_at}"));
    e.nested(consumer)?;
    e.ins(format!("bra.uni {end}"));
    e.place_label(&producer_at);
    e.nested(producer)?;
    e.place_label(&end);
    Ok(())
}
