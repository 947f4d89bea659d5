//! Structured control flow as labels and branches.
//!
//! `if c { A } else { B }` becomes `@!c bra ELSE; A; bra END; ELSE: B; END:` and
//! `while { C } c { B }` becomes `TOP: C; @!c bra EXIT; B; bra TOP; EXIT:`. The block IR's
//! control flow is uniform across a program's threads, so barriers inside are fine.

use crate::emit::Emitter;
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
