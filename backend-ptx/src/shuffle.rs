//! Warp shuffles: `shfl.sync.bfly.b32` (xor of the lane index) and `shfl.sync.idx.b32`
//! (a given lane), over the full warp (member mask `0xffffffff`, clamp 31).
//!
//! 64-bit values move as two 32-bit halves, 16-bit floats widened to 32 bits, booleans as
//! 0/1.

use crate::emit::Emitter;
use crate::names::Class;
use rutile_ir::ScalarType;

/// `d = v` of lane `lane ^ b` (`mode` "bfly") or of lane `b` ("idx").
pub(crate) fn shuffle(e: &mut Emitter, d: &str, t: ScalarType, v: &str, mode: &str, b: &str) {
    let shfl = |e: &mut Emitter, d: &str, v: &str| e.ins(format!("shfl.sync.{mode}.b32 {d}, {v}, {b}, 31, -1"));
    match Class::of(t) {
        Class::R | Class::F => shfl(e, d, v),
        Class::Rd | Class::Fd => {
            let [lo, hi, lo2, hi2] = [(); 4].map(|_| e.tmp(Class::R));
            e.ins(format!("mov.b64 {{{lo}, {hi}}}, {v}"));
            shfl(e, &lo2, &lo);
            shfl(e, &hi2, &hi);
            e.ins(format!("mov.b64 {d}, {{{lo2}, {hi2}}}"));
        }
        Class::H => {
            let (w, w2) = (e.tmp(Class::R), e.tmp(Class::R));
            e.ins(format!("cvt.u32.u16 {w}, {v}"));
            shfl(e, &w2, &w);
            e.ins(format!("cvt.u16.u32 {d}, {w2}"));
        }
        Class::Pred => {
            let (w, w2) = (e.tmp(Class::R), e.tmp(Class::R));
            e.ins(format!("selp.u32 {w}, 1, 0, {v}"));
            shfl(e, &w2, &w);
            e.ins(format!("setp.ne.u32 {d}, {w2}, 0"));
        }
    }
}
