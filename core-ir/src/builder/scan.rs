//! Scans and reductions with a combine built from ops (Triton's `associative_scan`,
//! `cumsum`, `cumprod` and `reduce`), `gather`, `sort` and `histogram`.
//!
//! A combine is a closure, like the bodies of `for` and `if`: it gets the builder and the
//! two tuples `a` (earlier along the scan) and `b`, and returns the combined tuple. It runs
//! once, at build time, to record a region of element-wise ops on scalars.

use super::{KernelBuilder, Value};
use crate::ir::{Op, SourceLoc, ValueId};
use crate::types::{ScalarType, Type};

impl KernelBuilder {
    /// Inclusive scan of the tuple `values` (blocks of one shape) along `axis`, as
    /// `tl.associative_scan(values, axis, combine, reverse)`: element `i` of the results
    /// is `x[0] ⊕ ... ⊕ x[i]` (with `reverse`, `x[n-1] ⊕ ... ⊕ x[i]`), where
    /// `combine(k, a, b)` computes `a ⊕ b` from scalars and must be associative.
    #[track_caller]
    pub fn associative_scan_n<'b>(
        &'b self,
        values: &[Value<'b>],
        axis: u32,
        reverse: bool,
        combine: impl FnOnce(&'b KernelBuilder, &[Value<'b>], &[Value<'b>]) -> Vec<Value<'b>>,
    ) -> Vec<Value<'b>> {
        let loc = SourceLoc::caller();
        self.combine_op("scan", values, loc, combine, |values| Op::Scan {
            values,
            axis: axis.min(255) as u8,
            reverse,
        })
    }

    /// Reduces the tuple `values` (blocks of one shape) along `axis` with `combine`, as
    /// `tl.reduce(values, axis, combine_fn, keep_dims)`; the reduced axis stays with size 1
    /// when `keep_dims`. `combine` must be associative; how it is grouped is the device's
    /// choice.
    #[track_caller]
    pub fn reduce_n<'b>(
        &'b self,
        values: &[Value<'b>],
        axis: u32,
        keep_dims: bool,
        combine: impl FnOnce(&'b KernelBuilder, &[Value<'b>], &[Value<'b>]) -> Vec<Value<'b>>,
    ) -> Vec<Value<'b>> {
        let loc = SourceLoc::caller();
        let results = self.combine_op("reduce", values, loc, combine, |values| Op::ReduceCombine {
            values,
            axis: axis.min(255) as u8,
        });
        if !keep_dims {
            return results;
        }
        results
            .into_iter()
            .map(|r| {
                if self.is_poisoned(r.id) {
                    return r;
                }
                self.emit1(
                    Op::ExpandDims {
                        value: r.id,
                        axis: axis as u8,
                    },
                    None,
                    loc,
                )
            })
            .collect()
    }

    /// Combines the tuple of scalar numbers `values` over the programs of the cluster (see
    /// [`Value::cluster_reduce`](super::Value::cluster_reduce)) with `combine`, in one
    /// exchange: every program gets the programs' tuples combined from rank 0 up, left to
    /// right (`combine` must be associative, need not be commutative). Several statistics
    /// that depend on each other cost one round trip through the cluster this way, where a
    /// `cluster_reduce` each would cost one each: the softmax of a row split over a
    /// cluster combines each program's maximum `m` and its sum `s` relative to it,
    /// `(m_a, s_a) ⊕ (m_b, s_b) = (m, s_a·exp(m_a - m) + s_b·exp(m_b - m))` with
    /// `m = max(m_a, m_b)`. Each value is a scalar of 32 or 64 bits; without a cluster the
    /// result is `values`.
    #[track_caller]
    pub fn cluster_reduce_n<'b>(
        &'b self,
        values: &[Value<'b>],
        combine: impl FnOnce(&'b KernelBuilder, &[Value<'b>], &[Value<'b>]) -> Vec<Value<'b>>,
    ) -> Vec<Value<'b>> {
        let loc = SourceLoc::caller();
        self.combine_op("cluster_reduce", values, loc, combine, |values| {
            Op::ClusterReduceCombine { values }
        })
    }

    /// Builds a scan or reduction: checks the operands, records the combine region, and
    /// gives the results (placeholders after an error).
    fn combine_op<'b>(
        &'b self,
        name: &str,
        values: &[Value<'b>],
        loc: SourceLoc,
        combine: impl FnOnce(&'b KernelBuilder, &[Value<'b>], &[Value<'b>]) -> Vec<Value<'b>>,
        make: impl FnOnce(Vec<ValueId>) -> Op,
    ) -> Vec<Value<'b>> {
        let values: Vec<Value<'b>> = values.iter().map(|&v| self.adopt(name, v, loc)).collect();
        let ids: Vec<ValueId> = values.iter().map(|v| v.id).collect();
        let operand_types: Vec<Type> = values.iter().map(|v| v.ty()).collect();
        let op = make(ids.clone());
        let result_types = if self.check_operands(name, loc, &ids).is_err() {
            None
        } else {
            let s = self.state.borrow();
            match crate::typing::infer(&op, &|v| s.values[v].ty, None) {
                Ok(types) => Some(types),
                Err(message) => {
                    drop(s);
                    self.report(name, loc, message);
                    None
                }
            }
        };
        let Some(result_types) = result_types else {
            return operand_types.iter().map(|&t| self.poison(t)).collect();
        };
        let inst = self.append_shell(op, loc);
        let args = self.open_region(inst, 0, &crate::typing::combine_arg_types(&operand_types));
        let n = values.len();
        let yields = combine(self, &args[..n], &args[n..]);
        let combine_ok = self.check_combine_body(name, loc);
        self.finish_combine(name, &yields, &crate::typing::combine_yield_types(&operand_types), loc);
        self.close_region(inst);
        let results = self.set_results(inst, &result_types);
        if !combine_ok {
            return results.iter().map(|v| self.poison(v.ty())).collect();
        }
        results
    }

    /// `tl.cumsum(x, axis, reverse)`: booleans and integers narrower than 32 bits are summed
    /// as `i32` (unsigned ones as `u32`), and bf16 as f32, as Triton does (fp8 too).
    #[track_caller]
    pub fn cumsum<'b>(&'b self, x: Value<'b>, axis: u32, reverse: bool) -> Value<'b> {
        let loc = SourceLoc::caller();
        let x = self.adopt("cumsum", x, loc);
        let promoted = match x.dtype() {
            Some(s) if s.is_bool() || (s.is_signed_int() && s.bits() < 32) => Some(ScalarType::I32),
            Some(s) if s.is_unsigned_int() && s.bits() < 32 => Some(ScalarType::U32),
            Some(ScalarType::BF16) => Some(ScalarType::F32),
            Some(s) if s.is_fp8() => Some(ScalarType::F32),
            _ => None,
        };
        let x = match promoted {
            Some(s) => self.cast_to(x, s, loc),
            None => x,
        };
        let loc_scan = loc;
        self.combine_op(
            "cumsum",
            &[x],
            loc_scan,
            |_, a, b| vec![a[0] + b[0]],
            |values| Op::Scan {
                values,
                axis: axis.min(255) as u8,
                reverse,
            },
        )[0]
    }

    /// `tl.cumprod(x, axis, reverse)`: bf16 is multiplied as f32, as Triton does (fp8 too).
    #[track_caller]
    pub fn cumprod<'b>(&'b self, x: Value<'b>, axis: u32, reverse: bool) -> Value<'b> {
        let loc = SourceLoc::caller();
        let x = self.adopt("cumprod", x, loc);
        let x = if x.dtype() == Some(ScalarType::BF16) || x.dtype().is_some_and(ScalarType::is_fp8) {
            self.cast_to(x, ScalarType::F32, loc)
        } else {
            x
        };
        self.combine_op(
            "cumprod",
            &[x],
            loc,
            |_, a, b| vec![a[0] * b[0]],
            |values| Op::Scan {
                values,
                axis: axis.min(255) as u8,
                reverse,
            },
        )[0]
    }

    /// `tl.gather(src, index, axis)`: `out[.., i, ..] = src[.., index[.., i, ..], ..]`; the
    /// result has `index`'s shape. Off the gather axis, `index` has `src`'s dimensions.
    #[track_caller]
    pub fn gather<'b>(&'b self, src: Value<'b>, index: Value<'b>, axis: u32) -> Value<'b> {
        let loc = SourceLoc::caller();
        let (src, index) = (self.adopt("gather", src, loc), self.adopt("gather", index, loc));
        self.emit1(
            Op::Gather {
                src: src.id,
                index: index.id,
                axis: axis.min(255) as u8,
            },
            Some(src.ty().with_shape(index.ty().shape)),
            loc,
        )
    }

    /// `tl.sort(x, dim, descending)`: `x` sorted along `axis` (see [`Op::Sort`] for NaNs).
    #[track_caller]
    pub fn sort<'b>(&'b self, x: Value<'b>, axis: u32, descending: bool) -> Value<'b> {
        let loc = SourceLoc::caller();
        let x = self.adopt("sort", x, loc);
        self.emit1(
            Op::Sort {
                value: x.id,
                axis: axis.min(255) as u8,
                descending,
            },
            Some(x.ty()),
            loc,
        )
    }

    /// `tl.histogram(x, num_bins)`: the `i32` count of the elements of the 1-D integer block
    /// `x` equal to each of `0..num_bins` (a power of two); other values are not counted.
    #[track_caller]
    pub fn histogram<'b>(&'b self, x: Value<'b>, num_bins: u32) -> Value<'b> {
        let loc = SourceLoc::caller();
        let x = self.adopt("histogram", x, loc);
        let fallback = crate::types::Shape::new(&[num_bins.max(1)])
            .map(|s| Type::block(crate::types::Elem::Scalar(ScalarType::I32), s))
            .unwrap_or(Type::scalar(ScalarType::I32));
        self.emit1(Op::Histogram { value: x.id, num_bins }, Some(fallback), loc)
    }
}

impl<'b> Value<'b> {
    /// `tl.associative_scan(self, axis, combine, reverse)` of one block; see
    /// [`KernelBuilder::associative_scan_n`].
    #[track_caller]
    pub fn associative_scan(
        self,
        axis: u32,
        reverse: bool,
        combine: impl FnOnce(&'b KernelBuilder, Value<'b>, Value<'b>) -> Value<'b>,
    ) -> Value<'b> {
        let k = self.builder;
        k.associative_scan_n(&[self], axis, reverse, |k, a, b| vec![combine(k, a[0], b[0])])[0]
    }

    /// `tl.reduce(self, axis, combine, keep_dims)` of one block; see
    /// [`KernelBuilder::reduce_n`].
    #[track_caller]
    pub fn reduce(
        self,
        axis: u32,
        keep_dims: bool,
        combine: impl FnOnce(&'b KernelBuilder, Value<'b>, Value<'b>) -> Value<'b>,
    ) -> Value<'b> {
        let k = self.builder;
        k.reduce_n(&[self], axis, keep_dims, |k, a, b| vec![combine(k, a[0], b[0])])[0]
    }

    /// `tl.cumsum(self, axis, reverse)`; see [`KernelBuilder::cumsum`].
    #[track_caller]
    pub fn cumsum(self, axis: u32, reverse: bool) -> Value<'b> {
        self.builder.cumsum(self, axis, reverse)
    }

    /// `tl.cumprod(self, axis, reverse)`; see [`KernelBuilder::cumprod`].
    #[track_caller]
    pub fn cumprod(self, axis: u32, reverse: bool) -> Value<'b> {
        self.builder.cumprod(self, axis, reverse)
    }

    /// `tl.sort(self, axis, descending)`; see [`KernelBuilder::sort`].
    #[track_caller]
    pub fn sort(self, axis: u32, descending: bool) -> Value<'b> {
        self.builder.sort(self, axis, descending)
    }

    /// `tl.gather(self, index, axis)`; see [`KernelBuilder::gather`].
    #[track_caller]
    pub fn gather(self, index: Value<'b>, axis: u32) -> Value<'b> {
        self.builder.gather(self, index, axis)
    }

    /// `tl.histogram(self, num_bins)`; see [`KernelBuilder::histogram`].
    #[track_caller]
    pub fn histogram(self, num_bins: u32) -> Value<'b> {
        self.builder.histogram(self, num_bins)
    }
}

impl KernelBuilder {
    /// Checks the instructions a combine added to its (innermost, open) region: element-wise
    /// ops on scalars only (see [`crate::typing::check_combine_inst`]).
    fn check_combine_body(&self, name: &str, loc: SourceLoc) -> bool {
        let problem = {
            let s = self.state.borrow();
            let region = &s.open.last().expect("a region is open").region;
            region.insts.iter().find_map(|&i| {
                let inst = &s.insts[i];
                let types: Vec<Type> = inst.results.iter().map(|&r| s.values[r].ty).collect();
                let operands: Vec<Type> = inst.op.operands().iter().map(|&v| s.values[v].ty).collect();
                crate::typing::check_combine_inst(&inst.op, &operands, &types).err()
            })
        };
        match problem {
            Some(message) => {
                self.report(name, loc, message);
                false
            }
            None => true,
        }
    }

    /// Ends a combine region with the yield of its combined tuple, checking its types.
    fn finish_combine(&self, name: &str, values: &[Value<'_>], expected: &[Type], loc: SourceLoc) {
        self.finish_region(name, values, expected, "combined value", loc);
    }
}
