//! Dead-register elimination: removes every `Set` whose register nothing needs.
//!
//! The lowering writes registers generously: index arithmetic for every element of a
//! block, where a vector access reads only the first of each run; loop-carried pointers
//! advanced for every element, where only some are used. GPU assemblers do not always drop
//! such values when they are carried around a loop (a register that only feeds its own
//! next value is live to a per-instruction analysis), so they cost registers. This pass
//! marks what memory accesses, matrix instructions and control flow read, then everything
//! the `Set`s of those registers read, to a fixed point, and drops the other `Set`s.
//! Registers are mutable, so liveness is per register: every `Set` of a live register stays.

use super::{Expr, Reg, Stmt, ThreadKernel};

/// Removes the `Set`s of registers that no statement needs.
pub fn eliminate_dead_registers(k: &mut ThreadKernel) {
    let mut live = vec![false; k.regs.len()];
    let mut stack = Vec::new();
    let mark = |r: Reg, live: &mut Vec<bool>, stack: &mut Vec<Reg>| {
        if !live[r.index()] {
            live[r.index()] = true;
            stack.push(r);
        }
    };
    // The roots: what statements other than `Set` read.
    let mut sets: Vec<Vec<Reg>> = vec![Vec::new(); k.regs.len()];
    super::walk_stmts(&k.body, &mut |s| match s {
        Stmt::Set { dst, expr } => sets[dst.index()].extend(operands(expr)),
        _ => reads(s, &mut |r| mark(r, &mut live, &mut stack)),
    });
    while let Some(r) = stack.pop() {
        for &o in &sets[r.index()] {
            mark(o, &mut live, &mut stack);
        }
    }
    sweep(&mut k.body, &live);
}

/// The registers statement `s` writes, other than through the statement lists nested in it.
pub fn writes(s: &Stmt, f: &mut impl FnMut(Reg)) {
    match s {
        Stmt::Set { dst, .. } | Stmt::Atomic { dst, .. } | Stmt::AtomicCas { dst, .. } => f(*dst),
        Stmt::Load { dsts, .. } | Stmt::LdMatrix { dsts, .. } => dsts.iter().for_each(|&d| f(d)),
        Stmt::Mma { d, .. } | Stmt::MmaTf32 { d, .. } => d.iter().for_each(|&r| f(r)),
        Stmt::Wgmma { acc, .. } => acc.iter().for_each(|&r| f(r)),
        // Listed one by one, so that a statement that comes to write registers is not
        // passed over here.
        Stmt::Store { .. }
        | Stmt::AsyncCopy { .. }
        | Stmt::AsyncCommit
        | Stmt::AsyncWait { .. }
        | Stmt::FenceProxyAsync
        | Stmt::MbarrierInit { .. }
        | Stmt::MbarrierArriveExpectTx { .. }
        | Stmt::MbarrierWait { .. }
        | Stmt::MbarrierArrive { .. }
        | Stmt::Specialized { .. }
        | Stmt::NamedBarrier { .. }
        | Stmt::Turn { .. }
        | Stmt::ClusterStore { .. }
        | Stmt::ClusterBarrier
        | Stmt::ClusterArrive
        | Stmt::ClusterWait
        | Stmt::SetMaxRegisters { .. }
        | Stmt::MbarrierInval { .. }
        | Stmt::TmaLoad { .. }
        | Stmt::TmaStore { .. }
        | Stmt::BulkCommit { .. }
        | Stmt::BulkWaitRead { .. }
        | Stmt::WgmmaFence
        | Stmt::WgmmaCommit
        | Stmt::WgmmaWait { .. }
        | Stmt::CoopLoad { .. }
        | Stmt::CoopStore { .. }
        | Stmt::CoopMulAdd { .. }
        | Stmt::CoopMul { .. }
        | Stmt::CoopZero { .. }
        | Stmt::Barrier
        | Stmt::If { .. }
        | Stmt::Print { .. }
        | Stmt::While { .. }
        | Stmt::Comment(_) => {}
    }
}

/// The registers statement `s` reads, other than a `Set` (whose operands are those of its
/// expression, [`operands`]); a nested statement list's are its own statements'. A
/// predicated load reads its destinations too: they keep their old values where it does
/// not act.
pub fn reads(s: &Stmt, f: &mut impl FnMut(Reg)) {
    match s {
        Stmt::Set { .. } => {}
        Stmt::Load { dsts, index, pred, .. } => {
            f(*index);
            if let Some(p) = pred {
                f(*p);
                // A predicated load keeps its registers' old values where it does not
                // act: those are read, so their `Set`s must stay.
                for &d in dsts {
                    f(d);
                }
            }
        }
        Stmt::Store {
            values, index, pred, ..
        } => {
            for &v in values.iter().chain([index]).chain(pred) {
                f(v);
            }
        }
        Stmt::Atomic {
            dst,
            index,
            value,
            pred,
            ..
        } => {
            for &v in [dst, index, value].into_iter().chain(pred) {
                f(v);
            }
        }
        Stmt::AtomicCas {
            dst,
            index,
            cmp,
            value,
            pred,
            ..
        } => {
            for &v in [dst, index, cmp, value].into_iter().chain(pred) {
                f(v);
            }
        }
        Stmt::LdMatrix { index, .. } | Stmt::CoopLoad { index, .. } | Stmt::CoopStore { index, .. } => f(*index),
        Stmt::CoopMulAdd { .. } | Stmt::CoopMul { .. } | Stmt::CoopZero { .. } => {}
        Stmt::AsyncCopy { dst, src, pred, .. } => {
            for &v in [dst, src].into_iter().chain(pred) {
                f(v);
            }
        }
        Stmt::AsyncCommit | Stmt::AsyncWait { .. } | Stmt::ClusterBarrier | Stmt::ClusterArrive | Stmt::ClusterWait => {
        }
        Stmt::ClusterStore {
            index,
            rank,
            value,
            pred,
            ..
        } => {
            for &v in [index, rank, value].into_iter().chain(pred) {
                f(v);
            }
        }
        Stmt::MbarrierInit { bar, pred, .. }
        | Stmt::MbarrierArriveExpectTx { bar, pred, .. }
        | Stmt::MbarrierArrive { bar, pred }
        | Stmt::MbarrierInval { bar, pred } => {
            for &v in std::iter::once(&bar.index).chain(pred) {
                f(v);
            }
        }
        Stmt::Turn { id, pred, .. } => {
            for &v in std::iter::once(id).chain(pred) {
                f(v);
            }
        }
        Stmt::MbarrierWait { bar, parity } => {
            for v in [bar.index, *parity] {
                f(v);
            }
        }
        Stmt::TmaLoad {
            dst, coords, bar, pred, ..
        } => {
            for &v in [dst, &bar.index].into_iter().chain(coords).chain(pred) {
                f(v);
            }
        }
        Stmt::Wgmma { acc, a, b, .. } => {
            let a_regs: Vec<Reg> = match a {
                super::WgmmaA::Shared(m) => vec![m.index],
                super::WgmmaA::Registers(r) => r.to_vec(),
            };
            for &v in acc.iter().chain(&a_regs).chain([&b.index]) {
                f(v);
            }
        }
        Stmt::TmaStore { src, coords, pred, .. } => {
            for &v in [src].into_iter().chain(coords).chain(pred) {
                f(v);
            }
        }
        Stmt::BulkCommit { pred } | Stmt::BulkWaitRead { pred, .. } => {
            if let Some(v) = *pred {
                f(v);
            }
        }
        Stmt::FenceProxyAsync | Stmt::WgmmaFence | Stmt::WgmmaCommit | Stmt::WgmmaWait { .. } => {}
        Stmt::Print {
            coords,
            values,
            pred,
            program,
            ..
        } => {
            for &v in coords.iter().chain(values).chain(pred).chain(program.iter().flatten()) {
                f(v);
            }
        }
        Stmt::Mma { a, b, c, .. } => {
            for &v in a.iter().chain(b).chain(c) {
                f(v);
            }
        }
        Stmt::MmaTf32 { a, b, c, .. } => {
            for &v in a.iter().chain(b).chain(c) {
                f(v);
            }
        }
        Stmt::If { cond, .. } | Stmt::While { cond, .. } => f(*cond),
        Stmt::Barrier
        | Stmt::Comment(_)
        | Stmt::Specialized { .. }
        | Stmt::NamedBarrier { .. }
        | Stmt::SetMaxRegisters { .. } => {}
    }
}

/// The registers expression `e` reads.
pub fn operands(e: &Expr) -> Vec<Reg> {
    match *e {
        Expr::Const(_) | Expr::Param(_) | Expr::Special(_) => vec![],
        Expr::Copy(a) | Expr::Unary(_, a) | Expr::Cast(a) | Expr::Bitcast(a) => vec![a],
        Expr::Binary(_, a, b) | Expr::Compare(_, a, b) => vec![a, b],
        Expr::Select(a, b, c) | Expr::Fma(a, b, c) | Expr::BytePerm(a, b, c) => vec![a, b, c],
        Expr::ShuffleXor { value, .. } => vec![value],
        Expr::ShuffleIdx { value, lane } => vec![value, lane],
        Expr::Rounded(_, _, ref args) => args.clone(),
    }
}

fn sweep(stmts: &mut Vec<Stmt>, live: &[bool]) {
    // (A dead shuffle goes too: control flow is uniform and liveness is the same in every
    // thread, so all the lanes of a warp drop it together.)
    stmts.retain(|s| match s {
        Stmt::Set { dst, .. } => live[dst.index()],
        _ => true,
    });
    for s in stmts {
        match s {
            Stmt::If {
                then_body, else_body, ..
            } => {
                sweep(then_body, live);
                sweep(else_body, live);
            }
            Stmt::While { cond_body, body, .. } => {
                sweep(cond_body, live);
                sweep(body, live);
            }
            Stmt::Specialized { producer, consumer } => {
                sweep(producer, live);
                sweep(consumer, live);
            }
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{BinaryOp, CmpOp};
    use crate::thread::{Memory, ThreadKernelBuilder};
    use crate::types::ScalarType::I32;

    fn sets(k: &ThreadKernel) -> usize {
        let mut n = 0;
        k.walk(&mut |s| n += matches!(s, Stmt::Set { .. }) as usize);
        n
    }

    /// A chain that feeds nothing goes, and so does a loop-carried register that only
    /// feeds its own next value; what reaches a store, a loop condition or a predicated
    /// load's old value stays.
    #[test]
    fn dead_chains_and_self_feeding_loop_registers_go() {
        let mut b = ThreadKernelBuilder::new("dce", 1, 32);
        let out = b.ptr("out", I32);
        let tid = b.thread_id();
        let one = b.int(I32, 1);
        let dead = b.bin(BinaryOp::Mul, tid, one); // feeds nothing
        let _dead2 = b.bin(BinaryOp::Add, dead, one);
        let counter = b.int(I32, 0); // the loop's condition reads it: live
        let carried = b.int(I32, 7); // only feeds itself: dead
        let old = b.int(I32, 5); // a predicated load keeps it where it does not act: live
        let three = b.int(I32, 3);
        b.while_(
            |b| b.cmp(CmpOp::Lt, counter, three),
            |b| {
                let next = b.bin(BinaryOp::Add, carried, one);
                b.assign(carried, Expr::Copy(next));
                let c = b.bin(BinaryOp::Add, counter, one);
                b.assign(counter, Expr::Copy(c));
            },
        );
        let p = b.cmp(CmpOp::Lt, tid, three);
        b.push(Stmt::Load {
            dsts: vec![old],
            mem: Memory::Global { param: out },
            index: tid,
            pred: Some(p),
            cache: crate::ir::CacheModifier::Default,
        });
        b.store(vec![old], Memory::Global { param: out }, tid, None);
        let mut k = b.finish();
        let before = sets(&k);
        eliminate_dead_registers(&mut k);
        crate::thread::verify(&k).unwrap();
        // Gone: `dead`, `_dead2`, `carried`'s initial value, `next` and the copy into it.
        assert_eq!(before - sets(&k), 5, "{k}");
        let text = k.to_string();
        assert!(text.contains("while"), "{text}");
    }
}
