//! Reductions along one axis: within each thread, then across the lanes of a warp by
//! butterfly shuffles, then across warps through shared memory (or across all threads
//! through shared memory when the target has no shuffles). Every thread ends with the
//! result for the elements of its slice, so the result is in the slice layout.
//!
//! `sum` of f16/bf16 accumulates in f32. `argmax`/`argmin` carry (value, index) pairs; ties
//! go to the smaller index and NaN wins, as in the interpreter.

use super::{LVal, LowerError, Lowerer};
use crate::ir::CacheModifier;
use crate::ir::{BinaryOp, CmpOp, Inst, Literal, Op, ReduceOp};
use crate::layout::Layout;
use crate::thread::{Expr, Memory, Reg, Stmt};
use crate::types::{ScalarType, MAX_RANK};

/// A partial result: the value and, for argmax/argmin, its index.
#[derive(Clone, Copy)]
struct Partial {
    value: Reg,
    index: Option<Reg>,
}

impl Lowerer<'_> {
    pub(crate) fn reduce(&mut self, inst: &Inst) -> Result<LVal, LowerError> {
        let Op::Reduce { op, value, axis } = inst.op else {
            return Err(self.internal("not a reduction"));
        };
        let src = self.lval(value)?;
        let src_shape = self.k.ty(value).shape;
        let result_shape = self.k.ty(inst.results[0]).shape;
        let elem = self
            .k
            .ty(value)
            .scalar_type()
            .ok_or_else(|| self.unsupported(inst, "cannot reduce pointers"))?;
        // f32 max and min on a target without an instruction for them combine integer keys
        // (see `float_key`): one integer max per step instead of a dozen operations.
        let keyed =
            matches!(op, ReduceOp::Max | ReduceOp::Min) && elem == ScalarType::F32 && !self.target.native_float_minmax;
        let acc_ty = match (op, elem) {
            _ if keyed => ScalarType::I32,
            (ReduceOp::Sum, t) if matches!(t, ScalarType::F16 | ScalarType::BF16) || t.is_fp8() => ScalarType::F32,
            (_, ScalarType::Bool) => ScalarType::I32,
            (_, t) => t,
        };
        let is_arg = matches!(op, ReduceOp::ArgMax | ReduceOp::ArgMin);
        let layout = src.layout;
        let map = layout.map(src_shape);
        let d = layout.blocked_dim(axis as usize);
        let out_layout = layout.slice(d);
        let out_map = out_layout.map(result_shape);

        // 1. Within the thread, in order along the axis; a max or min (exact in any order)
        // into `Target::reduce_chains` interleaved partials a slot, combined at the end, so
        // that its dependent chain is that much shorter (attention's row maximum, which the
        // `exp2`s wait for, is 32 values a thread at 128-key blocks).
        // A sum likewise into `Target::sum_chains` (its rounding then follows that order).
        let chains = match op {
            ReduceOp::Max | ReduceOp::Min => self.target.reduce_chains.max(1) as usize,
            ReduceOp::Sum => self.target.sum_chains.max(1) as usize,
            _ => 1,
        };
        let mut parts: Vec<Option<Partial>> = vec![None; out_map.len * chains];
        let mut seen = vec![0usize; out_map.len];
        for (i, &r) in src.regs.iter().enumerate() {
            let v = if keyed {
                self.float_key(r, op)
            } else if acc_ty == elem {
                r
            } else {
                self.set(acc_ty, Expr::Cast(r))
            };
            let index = if is_arg { Some(self.coord(&map, i, d)) } else { None };
            let p = Partial { value: v, index };
            let mut j = map.split(i);
            j[d] = 0;
            let slot = out_map.join(j);
            let at = slot * chains + seen[slot] % chains;
            seen[slot] += 1;
            parts[at] = Some(match parts[at] {
                None => p,
                Some(acc) => self.combine(op, acc, p),
            });
        }
        let mut parts: Vec<Partial> = parts
            .chunks(chains)
            .map(|c| {
                let mut level: Vec<Partial> = c.iter().flatten().copied().collect();
                while level.len() > 1 {
                    level = level
                        .chunks(2)
                        .map(|pair| match *pair {
                            [a, b] => self.combine(op, a, b),
                            [a] => a,
                            _ => unreachable!("chunks of two"),
                        })
                        .collect();
                }
                level.pop().expect("every slot has an element")
            })
            .collect();

        // 2. Across lanes.
        let lanes = map.distinct_lanes(d);
        let warps = map.distinct_warps(d);
        let b = layout.blocked;
        let lane_shift: u32 = (0..b.rank as usize)
            .take_while(|&k| b.order[k] as usize != d)
            .map(|k| b.threads_per_warp[b.order[k] as usize].trailing_zeros())
            .sum();
        let warp_shift: u32 = (0..b.rank as usize)
            .take_while(|&k| b.order[k] as usize != d)
            .map(|k| b.warps_per_cta[b.order[k] as usize].trailing_zeros())
            .sum();
        let shuffles = self.target.shuffles;
        if lanes > 1 && shuffles {
            for bit in 0..lanes.trailing_zeros() {
                let mask = (1u32 << bit) << lane_shift;
                for p in parts.iter_mut() {
                    let value = self.set(acc_ty, Expr::ShuffleXor { value: p.value, mask });
                    let index = p
                        .index
                        .map(|i| self.set(ScalarType::I32, Expr::ShuffleXor { value: i, mask }));
                    *p = self.combine(op, *p, Partial { value, index });
                }
            }
        }

        // 3. Across warps (and lanes, without shuffles), through shared memory.
        let lanes_in_smem = if shuffles { 1 } else { lanes };
        let slots = warps * lanes_in_smem;
        if slots > 1 {
            parts = self.reduce_through_shared(
                op,
                acc_ty,
                &parts,
                &out_layout,
                result_shape,
                slots,
                (lanes_in_smem, lane_shift),
                (warps, warp_shift),
            )?;
        }

        let out_ty = match op {
            ReduceOp::ArgMax | ReduceOp::ArgMin => ScalarType::I32,
            _ => elem,
        };
        let regs: Vec<Reg> = parts
            .iter()
            .map(|p| {
                let r = if is_arg {
                    p.index.expect("arg reductions carry indices")
                } else {
                    p.value
                };
                let r = if keyed { self.key_to_float(r) } else { r };
                if self.regs[r].ty == out_ty {
                    r
                } else if out_ty == ScalarType::Bool {
                    let z = self.konst(acc_ty, Literal::Int(0));
                    self.set(ScalarType::Bool, Expr::Compare(CmpOp::Ne, r, z))
                } else {
                    self.set(out_ty, Expr::Cast(r))
                }
            })
            .collect();
        let layout = if result_shape.is_scalar() {
            Layout::scalar()
        } else {
            out_layout
        };
        Ok(LVal {
            layout,
            regs,
            ptr: None,
        })
    }

    /// Each thread writes its partials to slot `(warp, lane)` of its result elements; after a
    /// barrier, each combines all slots in order.
    #[allow(clippy::too_many_arguments)]
    fn reduce_through_shared(
        &mut self,
        op: ReduceOp,
        acc_ty: ScalarType,
        parts: &[Partial],
        out_layout: &Layout,
        result_shape: crate::types::Shape,
        slots: u32,
        (lanes, lane_shift): (u32, u32),
        (warps, warp_shift): (u32, u32),
    ) -> Result<Vec<Partial>, LowerError> {
        let i32t = ScalarType::I32;
        let numel = result_shape.numel() as u32;
        let values = self.shared_buffer(acc_ty, numel * slots);
        let index_base = if acc_ty == i32t { numel * slots } else { 0 };
        let has_index = parts[0].index.is_some();
        let indices = if has_index {
            Some(self.shared_buffer(i32t, index_base + numel * slots))
        } else {
            None
        };

        // This thread's slot: warp position along the axis, then lane position.
        let (_, lane, warp) = self.thread_ids();
        let part = |l: &mut Self, src: Reg, shift: u32, count: u32| -> Reg {
            let s = l.i32c(shift as i64);
            let m = l.i32c(count as i64 - 1);
            let shifted = l.set(i32t, Expr::Binary(BinaryOp::Shr, src, s));
            l.set(i32t, Expr::Binary(BinaryOp::And, shifted, m))
        };
        let warp_pos = part(self, warp, warp_shift, warps);
        let slot = if lanes > 1 {
            let lane_pos = part(self, lane, lane_shift, lanes);
            let l = self.i32c(lanes as i64);
            let w = self.set(i32t, Expr::Binary(BinaryOp::Mul, warp_pos, l));
            self.set(i32t, Expr::Binary(BinaryOp::Add, w, lane_pos))
        } else {
            warp_pos
        };

        let out_map = out_layout.map(result_shape);
        let mut strides = Self::value_strides(out_layout, result_shape);
        for s in strides.iter_mut().take(MAX_RANK) {
            *s *= slots as i64;
        }
        let lin = self.linear(&out_map, strides);
        let mut bases = Vec::with_capacity(parts.len());
        for (k, p) in parts.iter().enumerate() {
            let at = self.set(i32t, Expr::Binary(BinaryOp::Add, lin[k], slot));
            self.emit(Stmt::Store {
                values: vec![p.value],
                mem: Memory::Shared { alloc: values },
                index: at,
                pred: None,
            });
            if let (Some(buf), Some(i)) = (indices, p.index) {
                let off = self.i32c(index_base as i64);
                let at_i = self.set(i32t, Expr::Binary(BinaryOp::Add, at, off));
                self.emit(Stmt::Store {
                    values: vec![i],
                    mem: Memory::Shared { alloc: buf },
                    index: at_i,
                    pred: None,
                });
            }
            bases.push(lin[k]);
        }
        self.emit(Stmt::Barrier);
        let mut out = Vec::with_capacity(parts.len());
        for base in bases {
            let mut acc: Option<Partial> = None;
            for s in 0..slots {
                let c = self.i32c(s as i64);
                let at = self.set(i32t, Expr::Binary(BinaryOp::Add, base, c));
                let value = self.new_reg(acc_ty);
                self.emit(Stmt::Load {
                    dsts: vec![value],
                    mem: Memory::Shared { alloc: values },
                    index: at,
                    pred: None,
                    cache: CacheModifier::Default,
                });
                let index = match indices {
                    Some(buf) => {
                        let off = self.i32c(index_base as i64);
                        let at_i = self.set(i32t, Expr::Binary(BinaryOp::Add, at, off));
                        let r = self.new_reg(i32t);
                        self.emit(Stmt::Load {
                            dsts: vec![r],
                            mem: Memory::Shared { alloc: buf },
                            index: at_i,
                            pred: None,
                            cache: CacheModifier::Default,
                        });
                        Some(r)
                    }
                    None => None,
                };
                let p = Partial { value, index };
                acc = Some(match acc {
                    None => p,
                    Some(a) => self.combine(op, a, p),
                });
            }
            out.push(acc.expect("at least one slot"));
        }
        self.emit(Stmt::Barrier);
        Ok(out)
    }

    /// The integer key of an f32 for a max or min reduction. Its bits as an `i32`, with the
    /// 31 low bits flipped when the sign bit is set, order as the floats do, -0.0 below
    /// +0.0, and map back to exactly those bits. A NaN gets the key that wins (`i32::MAX`
    /// for max, `i32::MIN` for min), which maps back to a NaN.
    fn float_key(&mut self, x: Reg, op: ReduceOp) -> Reg {
        let i32t = ScalarType::I32;
        let bits = self.set(i32t, Expr::Bitcast(x));
        let key = self.flip_if_negative(bits);
        let low = self.konst(i32t, Literal::Int(0x7fff_ffff));
        let magnitude = self.set(i32t, Expr::Binary(BinaryOp::And, bits, low));
        let inf = self.konst(i32t, Literal::Int(0x7f80_0000));
        let nan = self.set(ScalarType::Bool, Expr::Compare(CmpOp::Gt, magnitude, inf));
        let wins = if op == ReduceOp::Max { i32::MAX } else { i32::MIN };
        let wins = self.konst(i32t, Literal::Int(wins as i64));
        self.set(i32t, Expr::Select(nan, wins, key))
    }

    /// The f32 whose key is `key` (see `float_key`).
    fn key_to_float(&mut self, key: Reg) -> Reg {
        let bits = self.flip_if_negative(key);
        self.set(ScalarType::F32, Expr::Bitcast(bits))
    }

    /// `bits` with its 31 low bits flipped when its sign bit is set (its own inverse).
    fn flip_if_negative(&mut self, bits: Reg) -> Reg {
        let i32t = ScalarType::I32;
        let s31 = self.konst(i32t, Literal::Int(31));
        // 0 or -1: the shift of a signed integer fills with the sign.
        let sign = self.set(i32t, Expr::Binary(BinaryOp::Shr, bits, s31));
        let low = self.konst(i32t, Literal::Int(0x7fff_ffff));
        let flip = self.set(i32t, Expr::Binary(BinaryOp::And, sign, low));
        self.set(i32t, Expr::Binary(BinaryOp::Xor, bits, flip))
    }

    /// Combines two partials, `a` coming first along the axis.
    fn combine(&mut self, op: ReduceOp, a: Partial, b: Partial) -> Partial {
        let ty = self.regs[a.value].ty;
        let binary = |l: &mut Self, bop| Partial {
            value: l.set(ty, Expr::Binary(bop, a.value, b.value)),
            index: None,
        };
        match op {
            ReduceOp::Sum => binary(self, BinaryOp::Add),
            ReduceOp::Max => binary(self, BinaryOp::Max),
            ReduceOp::Min => binary(self, BinaryOp::Min),
            ReduceOp::ArgMax | ReduceOp::ArgMin => {
                let bool_t = ScalarType::Bool;
                let index = |p: Partial| p.index.expect("arg reductions carry indices");
                let (ia, ib) = (index(a), index(b));
                let strictly = if op == ReduceOp::ArgMax { CmpOp::Gt } else { CmpOp::Lt };
                let wins = self.set(bool_t, Expr::Compare(strictly, b.value, a.value));
                let equal = self.set(bool_t, Expr::Compare(CmpOp::Eq, b.value, a.value));
                let earlier = self.set(bool_t, Expr::Compare(CmpOp::Lt, ib, ia));
                let tie = self.set(bool_t, Expr::Binary(BinaryOp::And, equal, earlier));
                let mut better = self.set(bool_t, Expr::Binary(BinaryOp::Or, wins, tie));
                if ty.is_float() {
                    // NaN wins over numbers; between NaNs the earlier index.
                    let a_nan = self.set(bool_t, Expr::Compare(CmpOp::Ne, a.value, a.value));
                    let b_nan = self.set(bool_t, Expr::Compare(CmpOp::Ne, b.value, b.value));
                    let t = self.konst(bool_t, Literal::Bool(true));
                    let a_num = self.set(bool_t, Expr::Binary(BinaryOp::Xor, a_nan, t));
                    let nan_over_num = self.set(bool_t, Expr::Binary(BinaryOp::And, b_nan, a_num));
                    let both = self.set(bool_t, Expr::Binary(BinaryOp::And, b_nan, a_nan));
                    let nan_tie = self.set(bool_t, Expr::Binary(BinaryOp::And, both, earlier));
                    let nan_better = self.set(bool_t, Expr::Binary(BinaryOp::Or, nan_over_num, nan_tie));
                    // A number never beats a NaN.
                    let b_num = self.set(bool_t, Expr::Binary(BinaryOp::Xor, b_nan, t));
                    let num_ok = self.set(bool_t, Expr::Binary(BinaryOp::And, better, a_num));
                    let num_ok = self.set(bool_t, Expr::Binary(BinaryOp::And, num_ok, b_num));
                    better = self.set(bool_t, Expr::Binary(BinaryOp::Or, num_ok, nan_better));
                }
                let value = self.set(ty, Expr::Select(better, b.value, a.value));
                let index = self.set(ScalarType::I32, Expr::Select(better, ib, ia));
                Partial {
                    value,
                    index: Some(index),
                }
            }
        }
    }
}
