//! Tests of the interpreter on kernels built by hand (`Kb`, a minimal test-only builder that
//! pushes instructions into a kernel's arenas).

use super::*;
use crate::arena::Arena;
use crate::ir::{
    AtomicOp, BinaryOp, CmpOp, Inst, Literal, Op, Param, ReduceOp, Region, SourceLoc, UnaryOp, ValueData, ValueDef,
    ValueId,
};
use crate::testing::Rng;
use crate::types::{Elem, ScalarType, ScalarType::*, Shape, Type};
use half::{bf16, f16};

// ---------------------------------------------------------------------------------------------
// A minimal kernel builder for tests.

/// The else branch of `Kb::if_else`.
type Else<'a> = Box<dyn FnOnce(&mut Kb) -> Vec<ValueId> + 'a>;

struct Kb {
    k: Kernel,
    /// The regions being built, innermost last; the first is the kernel body.
    regions: Vec<Region>,
}

fn blk(s: ScalarType, dims: &[u32]) -> Type {
    Type::block(Elem::Scalar(s), Shape::new(dims).unwrap())
}

fn pointee(ty: Type) -> ScalarType {
    match ty.elem {
        Elem::Ptr(s) | Elem::Scalar(s) => s,
    }
}

impl Kb {
    fn new(name: &str) -> Kb {
        Kb {
            k: Kernel {
                name: name.into(),
                params: vec![],
                values: Arena::new(),
                insts: Arena::new(),
                body: Region::default(),
                hints: Vec::new(),
            },
            regions: vec![Region::default()],
        }
    }
    /// The kernel, which the verifier must accept.
    fn finish(self) -> Kernel {
        let k = self.finish_unverified();
        if let Err(e) = crate::verify::verify(&k) {
            panic!("{e}");
        }
        k
    }
    fn finish_unverified(mut self) -> Kernel {
        assert_eq!(self.regions.len(), 1);
        self.k.body = self.regions.pop().unwrap();
        self.k
    }
    fn value(&mut self, ty: Type, def: ValueDef) -> ValueId {
        self.k.values.append(ValueData { ty, def })
    }
    fn ty(&self, v: ValueId) -> Type {
        self.k.values[v].ty
    }
    fn param(&mut self, name: &str, ty: Type) -> ValueId {
        let index = self.k.params.len() as u32;
        let value = self.value(ty, ValueDef::Param(index));
        self.k.params.push(Param {
            name: name.into(),
            ty,
            value,
        });
        value
    }
    #[track_caller]
    fn push(&mut self, op: Op, tys: &[Type]) -> Vec<ValueId> {
        let loc = SourceLoc::caller();
        let id = self.k.insts.append(Inst {
            op,
            results: vec![],
            regions: vec![],
            loc,
        });
        let results: Vec<_> = tys
            .iter()
            .enumerate()
            .map(|(i, &ty)| {
                self.value(
                    ty,
                    ValueDef::Result {
                        inst: id,
                        index: i as u32,
                    },
                )
            })
            .collect();
        self.k.insts[id].results = results.clone();
        self.regions.last_mut().unwrap().insts.push(id);
        results
    }
    #[track_caller]
    fn op(&mut self, op: Op, ty: Type) -> ValueId {
        self.push(op, &[ty])[0]
    }
    #[track_caller]
    fn constant(&mut self, value: Literal, ty: Type) -> ValueId {
        self.op(Op::Constant { value }, ty)
    }
    #[track_caller]
    fn i32c(&mut self, v: i32) -> ValueId {
        self.constant(Literal::Int(v as i64), Type::scalar(I32))
    }
    #[track_caller]
    fn pid(&mut self, axis: u8) -> ValueId {
        self.op(Op::ProgramId { axis }, Type::scalar(I32))
    }
    #[track_caller]
    fn arange(&mut self, start: i32, end: i32) -> ValueId {
        self.op(Op::Arange { start, end }, blk(I32, &[(end - start) as u32]))
    }
    #[track_caller]
    fn splat(&mut self, value: ValueId, dims: &[u32]) -> ValueId {
        let ty = self.ty(value).with_shape(Shape::new(dims).unwrap());
        self.op(Op::Splat { value }, ty)
    }
    #[track_caller]
    fn broadcast(&mut self, value: ValueId, dims: &[u32]) -> ValueId {
        let ty = self.ty(value).with_shape(Shape::new(dims).unwrap());
        self.op(Op::Broadcast { value }, ty)
    }
    #[track_caller]
    fn expand(&mut self, value: ValueId, axis: u8) -> ValueId {
        let ty = self.ty(value);
        let ty = ty.with_shape(ty.shape.insert_axis(axis as usize).unwrap());
        self.op(Op::ExpandDims { value, axis }, ty)
    }
    #[track_caller]
    fn reshape(&mut self, value: ValueId, dims: &[u32]) -> ValueId {
        let ty = self.ty(value).with_shape(Shape::new(dims).unwrap());
        self.op(Op::Reshape { value }, ty)
    }
    #[track_caller]
    fn permute(&mut self, value: ValueId, perm: &[u8]) -> ValueId {
        let ty = self.ty(value);
        let dims: Vec<u32> = perm.iter().map(|&p| ty.shape.dims()[p as usize]).collect();
        self.op(
            Op::Permute {
                value,
                perm: perm.to_vec(),
            },
            ty.with_shape(Shape::new(&dims).unwrap()),
        )
    }
    #[track_caller]
    fn unary(&mut self, op: UnaryOp, value: ValueId) -> ValueId {
        let ty = self.ty(value);
        self.op(Op::Unary { op, value }, ty)
    }
    #[track_caller]
    fn bin(&mut self, op: BinaryOp, lhs: ValueId, rhs: ValueId) -> ValueId {
        let ty = self.ty(lhs);
        self.op(Op::Binary { op, lhs, rhs }, ty)
    }
    #[track_caller]
    fn cmp(&mut self, op: CmpOp, lhs: ValueId, rhs: ValueId) -> ValueId {
        let ty = self.ty(lhs).with_elem(Elem::Scalar(Bool));
        self.op(Op::Compare { op, lhs, rhs }, ty)
    }
    #[track_caller]
    fn select(&mut self, cond: ValueId, on_true: ValueId, on_false: ValueId) -> ValueId {
        let ty = self.ty(on_true);
        self.op(
            Op::Select {
                cond,
                on_true,
                on_false,
            },
            ty,
        )
    }
    #[track_caller]
    fn fma(&mut self, a: ValueId, b: ValueId, c: ValueId) -> ValueId {
        let ty = self.ty(a);
        self.op(Op::Fma { a, b, c }, ty)
    }
    #[track_caller]
    fn cast(&mut self, value: ValueId, s: ScalarType) -> ValueId {
        let ty = self.ty(value).with_elem(Elem::Scalar(s));
        self.op(Op::Cast { value }, ty)
    }
    #[track_caller]
    fn bitcast(&mut self, value: ValueId, s: ScalarType) -> ValueId {
        let ty = self.ty(value).with_elem(Elem::Scalar(s));
        self.op(Op::Bitcast { value }, ty)
    }
    #[track_caller]
    fn addptr(&mut self, ptr: ValueId, offset: ValueId) -> ValueId {
        let ty = self.ty(ptr);
        self.op(Op::AddPtr { ptr, offset }, ty)
    }
    #[track_caller]
    fn load(&mut self, ptr: ValueId, mask: Option<ValueId>, other: Option<ValueId>) -> ValueId {
        let ty = self.ty(ptr);
        let ty = ty.with_elem(Elem::Scalar(pointee(ty)));
        self.op(
            Op::Load {
                ptr,
                mask,
                other,
                cache: Default::default(),
            },
            ty,
        )
    }
    #[track_caller]
    fn store(&mut self, ptr: ValueId, value: ValueId, mask: Option<ValueId>) {
        self.push(Op::Store { ptr, value, mask }, &[]);
    }
    #[track_caller]
    fn atomic(&mut self, op: AtomicOp, ptr: ValueId, value: ValueId, mask: Option<ValueId>) -> ValueId {
        let ty = self.ty(value);
        self.op(
            Op::Atomic {
                op,
                ptr,
                value,
                mask,
                order: Default::default(),
            },
            ty,
        )
    }
    #[track_caller]
    fn atomic_cas(&mut self, ptr: ValueId, cmp: ValueId, value: ValueId) -> ValueId {
        let ty = self.ty(value);
        self.op(
            Op::AtomicCas {
                ptr,
                cmp,
                value,
                mask: None,
                order: Default::default(),
            },
            ty,
        )
    }
    #[track_caller]
    fn reduce(&mut self, op: ReduceOp, value: ValueId, axis: u8) -> ValueId {
        let ty = self.ty(value);
        let elem = match op {
            ReduceOp::ArgMax | ReduceOp::ArgMin => Elem::Scalar(I32),
            _ => ty.elem,
        };
        self.op(
            Op::Reduce { op, value, axis },
            Type::block(elem, ty.shape.remove_axis(axis as usize).unwrap()),
        )
    }
    #[track_caller]
    fn dot(&mut self, a: ValueId, b: ValueId, acc: ValueId) -> ValueId {
        self.dot_with(a, b, acc, crate::ir::DotPrecision::Ieee)
    }
    #[track_caller]
    fn dot_with(&mut self, a: ValueId, b: ValueId, acc: ValueId, precision: crate::ir::DotPrecision) -> ValueId {
        let ty = self.ty(acc);
        let max_num_imprecise_acc = None;
        self.op(
            Op::Dot {
                a,
                b,
                acc,
                precision,
                max_num_imprecise_acc,
            },
            ty,
        )
    }
    /// Reserves an instruction whose op and regions are filled in by `finish_inst`.
    #[track_caller]
    fn reserve(&mut self) -> (crate::ir::InstId, SourceLoc) {
        let loc = SourceLoc::caller();
        let op = Op::Yield { values: vec![] };
        (
            self.k.insts.append(Inst {
                op,
                results: vec![],
                regions: vec![],
                loc,
            }),
            loc,
        )
    }
    fn region_args(&mut self, inst: crate::ir::InstId, region: u32, tys: &[Type]) -> Vec<ValueId> {
        tys.iter()
            .enumerate()
            .map(|(i, &ty)| {
                self.value(
                    ty,
                    ValueDef::RegionArg {
                        inst,
                        region,
                        index: i as u32,
                    },
                )
            })
            .collect()
    }
    /// Builds a region with `args` whose body `f` returns the values to yield (no yield when
    /// `None`).
    fn region(&mut self, args: Vec<ValueId>, f: impl FnOnce(&mut Kb, &[ValueId]) -> Option<Vec<ValueId>>) -> Region {
        self.regions.push(Region {
            args: args.clone(),
            insts: vec![],
        });
        if let Some(values) = f(self, &args) {
            self.push(Op::Yield { values }, &[]);
        }
        self.regions.pop().unwrap()
    }
    fn finish_inst(&mut self, id: crate::ir::InstId, op: Op, regions: Vec<Region>, tys: &[Type]) -> Vec<ValueId> {
        let results: Vec<_> = tys
            .iter()
            .enumerate()
            .map(|(i, &ty)| {
                self.value(
                    ty,
                    ValueDef::Result {
                        inst: id,
                        index: i as u32,
                    },
                )
            })
            .collect();
        let inst = &mut self.k.insts[id];
        inst.op = op;
        inst.regions = regions;
        inst.results = results.clone();
        self.regions.last_mut().unwrap().insts.push(id);
        results
    }
    #[track_caller]
    fn for_loop(
        &mut self,
        start: ValueId,
        end: ValueId,
        step: ValueId,
        init: &[ValueId],
        body: impl FnOnce(&mut Kb, ValueId, &[ValueId]) -> Vec<ValueId>,
    ) -> Vec<ValueId> {
        let (id, _) = self.reserve();
        let tys: Vec<Type> = init.iter().map(|&v| self.ty(v)).collect();
        let mut arg_tys = vec![self.ty(start)];
        arg_tys.extend(&tys);
        let args = self.region_args(id, 0, &arg_tys);
        let region = self.region(args, |kb, args| Some(body(kb, args[0], &args[1..])));
        let op = Op::For {
            start,
            end,
            step,
            init: init.to_vec(),
            num_stages: None,
        };
        self.finish_inst(id, op, vec![region], &tys)
    }
    #[track_caller]
    fn if_else(
        &mut self,
        cond: ValueId,
        tys: &[Type],
        then: impl FnOnce(&mut Kb) -> Vec<ValueId>,
        otherwise: Option<Else<'_>>,
    ) -> Vec<ValueId> {
        let (id, _) = self.reserve();
        let mut regions = vec![self.region(vec![], |kb, _| Some(then(kb)))];
        let otherwise = otherwise.unwrap_or_else(|| Box::new(|_| vec![]));
        regions.push(self.region(vec![], |kb, _| Some(otherwise(kb))));
        self.finish_inst(id, Op::If { cond }, regions, tys)
    }
    #[track_caller]
    fn while_loop(
        &mut self,
        init: &[ValueId],
        cond: impl FnOnce(&mut Kb, &[ValueId]) -> ValueId,
        body: impl FnOnce(&mut Kb, &[ValueId]) -> Vec<ValueId>,
    ) -> Vec<ValueId> {
        let (id, _) = self.reserve();
        let tys: Vec<Type> = init.iter().map(|&v| self.ty(v)).collect();
        let before_args = self.region_args(id, 0, &tys);
        let before = self.region(before_args, |kb, args| Some(vec![cond(kb, args)]));
        let body_args = self.region_args(id, 1, &tys);
        let body = self.region(body_args, |kb, args| Some(body(kb, args)));
        self.finish_inst(id, Op::While { init: init.to_vec() }, vec![before, body], &tys)
    }

    /// `base + offs` for a pointer scalar and an offset block.
    #[track_caller]
    fn ptrs(&mut self, base: ValueId, offs: ValueId) -> ValueId {
        let dims = self.ty(offs).shape.dims().to_vec();
        let p = self.splat(base, &dims);
        self.addptr(p, offs)
    }
}

// ---------------------------------------------------------------------------------------------
// Helpers.

fn ptr_arg(buffer: usize) -> ArgValue {
    ArgValue::Ptr { buffer, offset: 0 }
}

/// Runs `out[i] = f(in_0[i], in_1[i], ...)` in one program over a masked block of the next
/// power of two, and returns `out`.
fn elementwise(inputs: &[HostBuffer], out: ScalarType, f: impl FnOnce(&mut Kb, &[ValueId]) -> ValueId) -> HostBuffer {
    let n = inputs[0].len();
    let block = n.next_power_of_two() as u32;
    let mut kb = Kb::new("elementwise");
    let params: Vec<_> = inputs
        .iter()
        .enumerate()
        .map(|(i, b)| kb.param(&format!("in{i}"), Type::ptr(b.elem())))
        .collect();
    let out_p = kb.param("out", Type::ptr(out));
    let n_p = kb.param("n", Type::scalar(I32));
    let offs = kb.arange(0, block as i32);
    let nb = kb.splat(n_p, &[block]);
    let mask = kb.cmp(CmpOp::Lt, offs, nb);
    let vals: Vec<_> = params
        .iter()
        .map(|&p| {
            let ptrs = kb.ptrs(p, offs);
            kb.load(ptrs, Some(mask), None)
        })
        .collect();
    let r = f(&mut kb, &vals);
    let ptrs = kb.ptrs(out_p, offs);
    kb.store(ptrs, r, Some(mask));
    let kernel = kb.finish();
    let mut buffers: Vec<HostBuffer> = inputs.to_vec();
    buffers.push(HostBuffer::zeros(out, n));
    let mut args: Vec<ArgValue> = (0..=inputs.len()).map(ptr_arg).collect();
    args.push(ArgValue::Int(n as i64));
    run(&kernel, [1, 1, 1], &args, &mut buffers).unwrap();
    buffers.pop().unwrap()
}

fn binary_op<T: Element>(op: BinaryOp, a: &[T], b: &[T]) -> Vec<T> {
    let inputs = [HostBuffer::from_slice(a), HostBuffer::from_slice(b)];
    elementwise(&inputs, T::TYPE, |kb, v| kb.bin(op, v[0], v[1]))
        .to_vec()
        .unwrap()
}

fn unary_op<T: Element>(op: UnaryOp, a: &[T]) -> Vec<T> {
    elementwise(&[HostBuffer::from_slice(a)], T::TYPE, |kb, v| kb.unary(op, v[0]))
        .to_vec()
        .unwrap()
}

fn cast_to<T: Element, U: Element>(a: &[T]) -> Vec<U> {
    elementwise(&[HostBuffer::from_slice(a)], U::TYPE, |kb, v| kb.cast(v[0], U::TYPE))
        .to_vec()
        .unwrap()
}

fn bits32(v: &[f32]) -> Vec<u32> {
    v.iter().map(|x| x.to_bits()).collect()
}

// ---------------------------------------------------------------------------------------------
// Integer arithmetic.

#[test]
fn signed_division_truncates_and_wraps() {
    let a = [-7, 7, -7, 7, i32::MIN, 5, -5, 0, i32::MIN, 1];
    let b = [2, -2, -2, 2, -1, 0, 0, 3, 1, i32::MIN];
    assert_eq!(
        binary_op(BinaryOp::Div, &a, &b),
        [-3, -3, 3, 3, i32::MIN, 0, 0, 0, i32::MIN, 0]
    );
    assert_eq!(binary_op(BinaryOp::Rem, &a, &b), [-1, 1, -1, 1, 0, 0, 0, 0, 0, 1]);
    // (a + b - 1) / b, wrapping: (MIN - 2) wraps to MAX - 1.
    assert_eq!(
        binary_op(BinaryOp::CeilDiv, &a, &b)[..5],
        [-3, -2, 5, 4, -(i32::MAX - 1)]
    );
    assert_eq!(binary_op(BinaryOp::CeilDiv, &[10i32, 9, 0], &[3, 3, 3]), [4, 3, 0]);
}

#[test]
fn unsigned_ops_use_unsigned_values() {
    let a = [u64::MAX, 1 << 63, 7, 3];
    let b = [2, 3, 0, u64::MAX];
    assert_eq!(binary_op(BinaryOp::Div, &a, &b), [u64::MAX / 2, (1 << 63) / 3, 0, 0]);
    assert_eq!(binary_op(BinaryOp::Rem, &a, &b), [1, (1u64 << 63) % 3, 0, 3]);
    assert_eq!(binary_op(BinaryOp::Max, &a, &b), [u64::MAX, 1 << 63, 7, u64::MAX]);
    assert_eq!(binary_op(BinaryOp::Shr, &a, &[63, 63, 64, 1]), [1, 1, 0, 1]);
    let a = [200u8, 255, 0, 17];
    let b = [100u8, 1, 1, 0];
    assert_eq!(binary_op(BinaryOp::Add, &a, &b), [44, 0, 1, 17]);
    assert_eq!(binary_op(BinaryOp::Sub, &a, &b), [100, 254, 255, 17]);
    assert_eq!(binary_op(BinaryOp::Mul, &a, &b), [32, 255, 0, 0]);
    assert_eq!(unary_op(UnaryOp::Neg, &a), [56, 1, 0, 239]);
    assert_eq!(unary_op(UnaryOp::Not, &a), [55, 0, 255, 238]);
    assert_eq!(unary_op(UnaryOp::Abs, &a), a);
}

#[test]
fn signed_unary_ops_wrap() {
    let a = [i32::MIN, -5, 0, i32::MAX];
    assert_eq!(unary_op(UnaryOp::Abs, &a), [i32::MIN, 5, 0, i32::MAX]);
    assert_eq!(unary_op(UnaryOp::Neg, &a), [i32::MIN, 5, 0, -i32::MAX]);
    assert_eq!(unary_op(UnaryOp::Not, &a), [i32::MAX, 4, -1, i32::MIN]);
}

/// `popc`, `clz`, `brev` and `ffs` on the bits of each integer width, signed values by
/// their bits (a reversed signed value takes its sign from its new top bit), against
/// Rust's own counts.
#[test]
fn bit_ops_count_and_reverse_the_bits_of_each_width() {
    let a = [0i8, -1, i8::MIN, 1, 6, -128 + 3];
    assert_eq!(unary_op(UnaryOp::Popc, &a), [0, 8, 1, 1, 2, 3]);
    assert_eq!(unary_op(UnaryOp::Clz, &a), [8, 0, 0, 7, 5, 0]);
    assert_eq!(unary_op(UnaryOp::Brev, &a), [0, -1, 1, i8::MIN, 0x60, -64 + 1]);
    assert_eq!(unary_op(UnaryOp::Ffs, &a), [0, 1, 8, 1, 2, 1]);
    let a = [0u16, u16::MAX, 0x8000, 0x00F0];
    assert_eq!(unary_op(UnaryOp::Popc, &a), [0, 16, 1, 4]);
    assert_eq!(unary_op(UnaryOp::Clz, &a), [16, 0, 0, 8]);
    assert_eq!(unary_op(UnaryOp::Brev, &a), [0, u16::MAX, 1, 0x0F00]);
    assert_eq!(unary_op(UnaryOp::Ffs, &a), [0, 1, 16, 5]);
    let a = [0i32, -1, i32::MIN, 0x1234_5678, -0x1234_5678];
    let want = |f: fn(u32) -> i32| a.iter().map(|&v| f(v as u32)).collect::<Vec<_>>();
    assert_eq!(unary_op(UnaryOp::Popc, &a), want(|v| v.count_ones() as i32));
    assert_eq!(unary_op(UnaryOp::Clz, &a), want(|v| v.leading_zeros() as i32));
    assert_eq!(unary_op(UnaryOp::Brev, &a), want(|v| v.reverse_bits() as i32));
    assert_eq!(
        unary_op(UnaryOp::Ffs, &a),
        want(|v| if v == 0 { 0 } else { v.trailing_zeros() as i32 + 1 })
    );
    let a = [0u64, u64::MAX, 1 << 63, 0x0000_0001_0000_0000, 0x1234_5678_9ABC_DEF0];
    let want = |f: fn(u64) -> u64| a.iter().map(|&v| f(v)).collect::<Vec<_>>();
    assert_eq!(unary_op(UnaryOp::Popc, &a), want(|v| v.count_ones() as u64));
    assert_eq!(unary_op(UnaryOp::Clz, &a), want(|v| v.leading_zeros() as u64));
    assert_eq!(unary_op(UnaryOp::Brev, &a), want(u64::reverse_bits));
    assert_eq!(
        unary_op(UnaryOp::Ffs, &a),
        want(|v| if v == 0 { 0 } else { v.trailing_zeros() as u64 + 1 })
    );
}

#[test]
fn shifts_at_or_over_the_width() {
    let a = [1i32, -8, -8, 5, 5, i32::MIN, -1];
    let b = [31, 1, 40, 32, -1, 31, 100];
    assert_eq!(binary_op(BinaryOp::Shl, &a, &b), [i32::MIN, -16, 0, 0, 0, 0, 0]);
    assert_eq!(binary_op(BinaryOp::Shr, &a, &b), [0, -4, -1, 0, 0, -1, -1]);
    let a = [0x80u8, 0xFF, 1];
    let b = [7u8, 8, 255];
    assert_eq!(binary_op(BinaryOp::Shl, &a, &b), [0, 0, 0]);
    assert_eq!(binary_op(BinaryOp::Shr, &a, &b), [1, 0, 0]);
}

/// Random operands for every integer type against Rust's wrapping arithmetic.
macro_rules! random_int_ops {
    ($name:ident, $t:ty) => {
        #[test]
        fn $name() {
            let mut rng = Rng::new(<$t>::BITS as u64);
            let n = 300;
            let a: Vec<$t> = (0..n).map(|_| rng.next_u64() as $t).collect();
            // Some zeros, small values and shift amounts around the width among the divisors.
            let b: Vec<$t> = (0..n)
                .map(|i| match i % 5 {
                    0 => 0,
                    1 => (rng.next_u64() % 70) as $t,
                    2 => (rng.next_u64() % 7) as $t,
                    _ => rng.next_u64() as $t,
                })
                .collect();
            let bits = <$t>::BITS as u64;
            let check = |op: BinaryOp, f: &dyn Fn($t, $t) -> $t| {
                let want: Vec<$t> = a.iter().zip(&b).map(|(&x, &y)| f(x, y)).collect();
                assert_eq!(binary_op(op, &a, &b), want, "{op:?} of {}", stringify!($t));
            };
            check(BinaryOp::Add, &|x, y| x.wrapping_add(y));
            check(BinaryOp::Sub, &|x, y| x.wrapping_sub(y));
            check(BinaryOp::Mul, &|x, y| x.wrapping_mul(y));
            check(BinaryOp::Div, &|x, y| {
                if y == 0 {
                    0
                } else {
                    x.wrapping_div(y)
                }
            });
            check(BinaryOp::Rem, &|x, y| {
                if y == 0 {
                    0
                } else {
                    x.wrapping_rem(y)
                }
            });
            check(BinaryOp::And, &|x, y| x & y);
            check(BinaryOp::Or, &|x, y| x | y);
            check(BinaryOp::Xor, &|x, y| x ^ y);
            check(BinaryOp::Min, &|x, y| x.min(y));
            check(BinaryOp::Max, &|x, y| x.max(y));
            #[allow(unused_comparisons)]
            let over = |y: $t| y < 0 || y as u64 >= bits;
            check(BinaryOp::Shl, &|x, y| if over(y) { 0 } else { x << y });
            #[allow(unused_comparisons)]
            check(BinaryOp::Shr, &|x, y| {
                if over(y) {
                    if x < 0 {
                        !0
                    } else {
                        0
                    }
                } else {
                    x >> y
                }
            });
        }
    };
}
random_int_ops!(random_ops_i8, i8);
random_int_ops!(random_ops_i16, i16);
random_int_ops!(random_ops_i32, i32);
random_int_ops!(random_ops_i64, i64);
random_int_ops!(random_ops_u8, u8);
random_int_ops!(random_ops_u16, u16);
random_int_ops!(random_ops_u32, u32);
random_int_ops!(random_ops_u64, u64);

// ---------------------------------------------------------------------------------------------
// Float arithmetic.

#[test]
fn f32_arithmetic_is_correctly_rounded() {
    let mut rng = Rng::new(1);
    let n = 500;
    let a = rng.f32s(n, -1e3, 1e3);
    let mut b = rng.f32s(n, -10.0, 10.0);
    b[3] = 0.0;
    b[4] = -0.0;
    let check = |op: BinaryOp, f: &dyn Fn(f32, f32) -> f32| {
        let want: Vec<f32> = a.iter().zip(&b).map(|(&x, &y)| f(x, y)).collect();
        assert_eq!(bits32(&binary_op(op, &a, &b)), bits32(&want), "{op:?}");
    };
    check(BinaryOp::Add, &|x, y| x + y);
    check(BinaryOp::Sub, &|x, y| x - y);
    check(BinaryOp::Mul, &|x, y| x * y);
    check(BinaryOp::Div, &|x, y| x / y);
    check(BinaryOp::Rem, &|x, y| x % y);
    let c = rng.f32s(n, -1e3, 1e3);
    let inputs = [
        HostBuffer::from_slice(&a),
        HostBuffer::from_slice(&b),
        HostBuffer::from_slice(&c),
    ];
    let got: Vec<f32> = elementwise(&inputs, F32, |kb, v| kb.fma(v[0], v[1], v[2]))
        .to_vec()
        .unwrap();
    let want: Vec<f32> = (0..n).map(|i| a[i].mul_add(b[i], c[i])).collect();
    assert_eq!(bits32(&got), bits32(&want));
}

#[test]
fn f16_and_bf16_arithmetic_round_to_nearest_even() {
    let mut rng = Rng::new(2);
    let n = 500;
    let a: Vec<f16> = rng.f16s(n, -100.0, 100.0);
    let b: Vec<f16> = rng.f16s(n, -3.0, 3.0);
    // half's operators compute in f32 and round once, which is exact for f16.
    let check = |op: BinaryOp, f: &dyn Fn(f16, f16) -> f16| {
        let want: Vec<u16> = a.iter().zip(&b).map(|(&x, &y)| f(x, y).to_bits()).collect();
        let got: Vec<u16> = binary_op(op, &a, &b).iter().map(|x| x.to_bits()).collect();
        assert_eq!(got, want, "{op:?}");
    };
    check(BinaryOp::Add, &|x, y| x + y);
    check(BinaryOp::Mul, &|x, y| x * y);
    check(BinaryOp::Div, &|x, y| x / y);
    // Overflow to infinity and a tie: 2048 + 1 is halfway between 2048 and 2050.
    let got = binary_op(BinaryOp::Add, &[f16::MAX, f16::from_f32(2048.0)], &[f16::MAX, f16::ONE]);
    assert_eq!(got, [f16::INFINITY, f16::from_f32(2048.0)]);
    let a: Vec<bf16> = rng.f32s(n, -1e5, 1e5).into_iter().map(bf16::from_f32).collect();
    let b: Vec<bf16> = rng.f32s(n, -1e5, 1e5).into_iter().map(bf16::from_f32).collect();
    let want: Vec<u16> = a.iter().zip(&b).map(|(&x, &y)| (x * y).to_bits()).collect();
    let got: Vec<u16> = binary_op(BinaryOp::Mul, &a, &b).iter().map(|x| x.to_bits()).collect();
    assert_eq!(got, want);
}

#[test]
fn min_max_propagate_nan_and_order_zeros() {
    let nan = f32::NAN;
    let a = [1.0, nan, 2.0, -0.0, 0.0, f32::INFINITY, -f32::INFINITY];
    let b = [2.0, 1.0, nan, 0.0, -0.0, nan, 5.0];
    let min = binary_op(BinaryOp::Min, &a, &b);
    let max = binary_op(BinaryOp::Max, &a, &b);
    assert_eq!(min[0], 1.0);
    assert!(min[1].is_nan() && min[2].is_nan() && min[5].is_nan());
    assert!(max[1].is_nan() && max[2].is_nan() && max[5].is_nan());
    assert_eq!(max[0], 2.0);
    assert_eq!(bits32(&min[3..5]), bits32(&[-0.0, -0.0]));
    assert_eq!(bits32(&max[3..5]), bits32(&[0.0, 0.0]));
    assert_eq!((min[6], max[6]), (-f32::INFINITY, 5.0));
}

#[test]
fn comparisons_are_ordered_except_ne() {
    let a = [1.0f32, f32::NAN, 2.0, -0.0];
    let b = [1.0f32, f32::NAN, f32::NAN, 0.0];
    let run_cmp = |op: CmpOp| -> Vec<bool> {
        let inputs = [HostBuffer::from_slice(&a), HostBuffer::from_slice(&b)];
        elementwise(&inputs, Bool, |kb, v| kb.cmp(op, v[0], v[1]))
            .to_bools()
            .unwrap()
    };
    assert_eq!(run_cmp(CmpOp::Eq), [true, false, false, true]);
    assert_eq!(run_cmp(CmpOp::Ne), [false, true, true, false]);
    assert_eq!(run_cmp(CmpOp::Lt), [false, false, false, false]);
    assert_eq!(run_cmp(CmpOp::Ge), [true, false, false, true]);
    // Unsigned 64-bit values compare as unsigned.
    let inputs = [
        HostBuffer::from_slice(&[u64::MAX, 1]),
        HostBuffer::from_slice(&[1u64, u64::MAX]),
    ];
    let lt = elementwise(&inputs, Bool, |kb, v| kb.cmp(CmpOp::Lt, v[0], v[1]))
        .to_bools()
        .unwrap();
    assert_eq!(lt, [false, true]);
}

#[test]
fn transcendental_and_rounding_functions() {
    let x = [0.5f64, -1.0, 0.0, 4.0, 2.5, -2.5];
    let f = |op| unary_op(op, &x);
    let erf = f(UnaryOp::Erf);
    assert!((erf[0] - 0.520_499_877_813_046_5).abs() < 1e-15, "{}", erf[0]);
    assert!((erf[1] + 0.842_700_792_949_714_9).abs() < 1e-15);
    assert_eq!(f(UnaryOp::Sigmoid)[2], 0.5);
    assert_eq!(f(UnaryOp::Rsqrt)[3], 0.5);
    assert_eq!(f(UnaryOp::Sqrt)[3], 2.0);
    assert_eq!(f(UnaryOp::Floor)[4..], [2.0, -3.0]);
    assert_eq!(f(UnaryOp::Ceil)[4..], [3.0, -2.0]);
    assert_eq!(f(UnaryOp::Trunc)[4..], [2.0, -2.0]);
    assert_eq!(f(UnaryOp::Rint), [0.0, -1.0, 0.0, 4.0, 2.0, -2.0]);
    assert_eq!(unary_op(UnaryOp::Rint, &[3.5f64, -0.5, 0.49999997]), [4.0, -0.0, 0.0]);
    assert_eq!(f(UnaryOp::Exp2)[3], 16.0);
    assert_eq!(f(UnaryOp::Log2)[3], 2.0);
    assert_eq!(f(UnaryOp::Abs)[1], 1.0);
    assert!(f(UnaryOp::Log)[1].is_nan());
    // f32 results are the f64 function rounded once.
    let mut rng = Rng::new(3);
    let x = rng.f32s(200, -5.0, 5.0);
    for (op, g) in [
        (UnaryOp::Exp, f64::exp as fn(f64) -> f64),
        (UnaryOp::Sin, f64::sin),
        (UnaryOp::Erf, libm::erf),
    ] {
        let want: Vec<f32> = x.iter().map(|&v| g(v as f64) as f32).collect();
        assert_eq!(bits32(&unary_op(op, &x)), bits32(&want), "{op:?}");
    }
}

// ---------------------------------------------------------------------------------------------
// Casts and bitcasts.

#[test]
fn float_to_int_truncates_and_saturates() {
    let x = [1e10f32, -1e10, f32::NAN, 3.7, -3.7, f32::INFINITY, -f32::INFINITY, -0.9];
    assert_eq!(
        cast_to::<f32, i32>(&x),
        [i32::MAX, i32::MIN, 0, 3, -3, i32::MAX, i32::MIN, 0]
    );
    assert_eq!(cast_to::<f32, u8>(&x), [255, 0, 0, 3, 0, 255, 0, 0]);
    assert_eq!(cast_to::<f32, i64>(&x)[..2], [10_000_000_000, -10_000_000_000]);
    assert_eq!(
        cast_to::<f64, u64>(&[1e30, -1.0, 1.8e19]),
        [u64::MAX, 0, 18_000_000_000_000_000_000]
    );
}

#[test]
fn int_casts_wrap_and_convert_to_nearest() {
    assert_eq!(cast_to::<i32, i8>(&[300, -129, 127]), [44, 127, 127]);
    assert_eq!(cast_to::<i32, u64>(&[-1, 5]), [u64::MAX, 5]);
    assert_eq!(cast_to::<u32, i64>(&[u32::MAX]), [u32::MAX as i64]);
    assert_eq!(cast_to::<u64, f32>(&[u64::MAX]), [u64::MAX as f32]);
    assert_eq!(
        cast_to::<i32, f32>(&[16_777_217, -16_777_219]),
        [16_777_216.0, -16_777_220.0]
    );
    assert_eq!(
        cast_to::<i32, f16>(&[70_000, 2049, -3]),
        [f16::INFINITY, f16::from_f32(2048.0), f16::from_f32(-3.0)]
    );
    // 2^62 + 2^54 + 1 is just above the tie between two bf16s; via f64 it would be the tie.
    let v = (1i64 << 62) + (1 << 54) + 1;
    let got = cast_to::<i64, bf16>(&[v, -v]);
    let up = bf16::from_f64((1u64 << 62) as f64 + (1u64 << 55) as f64);
    assert_eq!(got, [up, -up]);
}

#[test]
fn float_to_float_rounds_once() {
    // 1 + 2^-11 + 2^-40 lies just above the tie between 1 and 1 + 2^-10 in f16.
    let v = 1.0 + 2f64.powi(-11) + 2f64.powi(-40);
    let got = cast_to::<f64, f16>(&[v, -v, 1.0 + 2f64.powi(-11), 65520.0, 1e-8]);
    let up = f16::from_f32(1.0 + 2f32.powi(-10));
    assert_eq!(got, [up, -up, f16::ONE, f16::INFINITY, f16::from_bits(0)]);
    let got = cast_to::<f64, bf16>(&[1.0 + 2f64.powi(-8) + 2f64.powi(-45)]);
    assert_eq!(got, [bf16::from_f32(1.0 + 2f32.powi(-7))]);
    // f16 subnormals.
    let tiny = 2f64.powi(-24);
    assert_eq!(
        cast_to::<f64, f16>(&[tiny * 1.5, tiny * 0.5, tiny * 0.50001]),
        [f16::from_bits(2), f16::from_bits(0), f16::from_bits(1)]
    );
    let x = [f32::NAN, f32::INFINITY, 1.5];
    let back: Vec<f16> = cast_to::<f32, f16>(&x);
    assert!(back[0].is_nan());
    assert_eq!(back[1..], [f16::INFINITY, f16::from_f32(1.5)]);
}

#[test]
fn bool_casts() {
    let x = [0.0f32, -0.0, f32::NAN, 2.5];
    let b = elementwise(&[HostBuffer::from_slice(&x)], Bool, |kb, v| kb.cast(v[0], Bool));
    assert_eq!(b.to_bools().unwrap(), [false, false, true, true]);
    let back = elementwise(&[b], F32, |kb, v| kb.cast(v[0], F32))
        .to_vec::<f32>()
        .unwrap();
    assert_eq!(back, [0.0, 0.0, 1.0, 1.0]);
    let b = HostBuffer::from_bools(&[true, false]);
    let ints = elementwise(&[b], I32, |kb, v| {
        let n = kb.unary(UnaryOp::Not, v[0]);
        kb.cast(n, I32)
    });
    assert_eq!(ints.to_vec::<i32>().unwrap(), [0, 1]);
}

#[test]
fn bitcasts_keep_bits() {
    let mut rng = Rng::new(4);
    let x: Vec<i32> = (0..100).map(|_| rng.next_u64() as i32 & 0x7F7F_FFFF).collect();
    let f: Vec<f32> = elementwise(&[HostBuffer::from_slice(&x)], F32, |kb, v| kb.bitcast(v[0], F32))
        .to_vec()
        .unwrap();
    assert_eq!(bits32(&f), x.iter().map(|&v| v as u32).collect::<Vec<_>>());
    let back: Vec<i32> = elementwise(&[HostBuffer::from_slice(&f)], I32, |kb, v| kb.bitcast(v[0], I32))
        .to_vec()
        .unwrap();
    assert_eq!(back, x);
    let h = [f16::from_f32(-1.5), f16::INFINITY, f16::from_bits(1)];
    let u: Vec<u16> = elementwise(&[HostBuffer::from_slice(&h)], U16, |kb, v| kb.bitcast(v[0], U16))
        .to_vec()
        .unwrap();
    assert_eq!(u, h.iter().map(|v| v.to_bits()).collect::<Vec<_>>());
    let i: Vec<i16> = elementwise(&[HostBuffer::from_slice(&u)], I16, |kb, v| kb.bitcast(v[0], I16))
        .to_vec()
        .unwrap();
    assert_eq!(i, u.iter().map(|&v| v as i16).collect::<Vec<_>>());
}

// ---------------------------------------------------------------------------------------------
// Shapes and reductions.

/// Loads a `dims` block from `x` (row-major), applies `f`, and stores the result (of `out_dims`)
/// to `out`.
fn block_op(
    x: HostBuffer,
    dims: &[u32],
    out: ScalarType,
    out_len: usize,
    f: impl FnOnce(&mut Kb, ValueId) -> ValueId,
) -> HostBuffer {
    let mut kb = Kb::new("block_op");
    let xp = kb.param("x", Type::ptr(x.elem()));
    let op = kb.param("out", Type::ptr(out));
    let n: u32 = dims.iter().product();
    let offs = kb.arange(0, n as i32);
    let offs = kb.reshape(offs, dims);
    let ptrs = kb.ptrs(xp, offs);
    let v = kb.load(ptrs, None, None);
    let r = f(&mut kb, v);
    let rdims = kb.ty(r).shape.dims().to_vec();
    let rn: u32 = rdims.iter().product();
    let offs = kb.arange(0, rn as i32);
    let offs = kb.reshape(offs, &rdims);
    let ptrs = kb.ptrs(op, offs);
    kb.store(ptrs, r, None);
    let kernel = kb.finish();
    let mut buffers = [x, HostBuffer::zeros(out, out_len)];
    run(&kernel, [1, 1, 1], &[ptr_arg(0), ptr_arg(1)], &mut buffers).unwrap();
    let [_, out] = buffers;
    out
}

#[test]
fn reductions_along_each_axis() {
    let mut rng = Rng::new(5);
    let x: Vec<i32> = (0..4 * 8 * 2).map(|_| (rng.next_u64() % 1000) as i32 - 500).collect();
    let at = |i: usize, j: usize, k: usize| x[i * 16 + j * 2 + k];
    for axis in 0..3u8 {
        let dims: [usize; 3] = [4, 8, 2];
        let got: Vec<i32> = block_op(HostBuffer::from_slice(&x), &[4, 8, 2], I32, 64, |kb, v| {
            kb.reduce(ReduceOp::Sum, v, axis)
        })
        .to_vec()
        .unwrap();
        let mut want = vec![];
        let kept: Vec<usize> = (0..3).filter(|&d| d != axis as usize).collect();
        for a in 0..dims[kept[0]] {
            for b in 0..dims[kept[1]] {
                let mut s = 0;
                for r in 0..dims[axis as usize] {
                    let mut idx = [0; 3];
                    idx[kept[0]] = a;
                    idx[kept[1]] = b;
                    idx[axis as usize] = r;
                    s += at(idx[0], idx[1], idx[2]);
                }
                want.push(s);
            }
        }
        assert_eq!(got[..want.len()], want, "axis {axis}");
    }
    // Integer sums wrap.
    let got: Vec<i8> = block_op(HostBuffer::from_slice(&[100i8, 100, 100, -1]), &[4], I8, 1, |kb, v| {
        kb.reduce(ReduceOp::Sum, v, 0)
    })
    .to_vec()
    .unwrap();
    assert_eq!(got, [43]);
}

#[test]
fn float_reductions_with_nan_and_infinity() {
    let nan = f32::NAN;
    let inf = f32::INFINITY;
    // Four rows of four.
    let x = [
        1.0, 5.0, 5.0, -2.0, //
        1.0, nan, 7.0, nan, //
        inf, -inf, 0.0, 1.0, //
        -0.0, 0.0, -3.0, -3.0,
    ];
    let red = |op: ReduceOp| -> HostBuffer {
        let out = if matches!(op, ReduceOp::ArgMax | ReduceOp::ArgMin) {
            I32
        } else {
            F32
        };
        block_op(HostBuffer::from_slice(&x), &[4, 4], out, 4, |kb, v| kb.reduce(op, v, 1))
    };
    let sum: Vec<f32> = red(ReduceOp::Sum).to_vec().unwrap();
    assert_eq!(sum[0], 9.0);
    assert!(sum[1].is_nan() && sum[2].is_nan());
    assert_eq!(sum[3], -6.0);
    let max: Vec<f32> = red(ReduceOp::Max).to_vec().unwrap();
    assert!(max[1].is_nan());
    assert_eq!([max[0], max[2], max[3]], [5.0, inf, 0.0]);
    assert!(max[3].is_sign_positive());
    let min: Vec<f32> = red(ReduceOp::Min).to_vec().unwrap();
    assert!(min[1].is_nan());
    assert_eq!([min[0], min[2], min[3]], [-2.0, -inf, -3.0]);
    // -0.0 and +0.0 are equal for argmax, so the first wins.
    assert_eq!(red(ReduceOp::ArgMax).to_vec::<i32>().unwrap(), [1, 1, 0, 0]);
    assert_eq!(red(ReduceOp::ArgMin).to_vec::<i32>().unwrap(), [3, 1, 1, 2]);
    // A long f32 sum accumulates in f64 and rounds once: 2^24 + 1023 rounds to 2^24 + 1024,
    // where adding ones in f32 would stay at 2^24.
    let ones: Vec<f32> = (0..1024).map(|i| if i == 0 { 16_777_216.0 } else { 1.0 }).collect();
    let got: Vec<f32> = block_op(HostBuffer::from_slice(&ones), &[1024], F32, 1, |kb, v| {
        kb.reduce(ReduceOp::Sum, v, 0)
    })
    .to_vec()
    .unwrap();
    assert_eq!(got, [16_778_240.0]);
}

#[test]
fn broadcast_permute_reshape_expand() {
    let x: Vec<i32> = (0..24).collect();
    // [2, 4, 2] -> permute (2, 0, 1) -> [2, 2, 4]
    let got: Vec<i32> = block_op(HostBuffer::from_slice(&x[..16]), &[2, 4, 2], I32, 16, |kb, v| {
        kb.permute(v, &[2, 0, 1])
    })
    .to_vec()
    .unwrap();
    let mut want = vec![];
    for c in 0..2 {
        for a in 0..2 {
            for b in 0..4 {
                want.push(x[a * 8 + b * 2 + c]);
            }
        }
    }
    assert_eq!(got, want);
    // [4] -> expand at 0 -> [1, 4] -> broadcast [2, 4]; expand at 1 -> [4, 1] -> broadcast [4, 2].
    let got: Vec<i32> = block_op(HostBuffer::from_slice(&x[..4]), &[4], I32, 16, |kb, v| {
        let row = kb.expand(v, 0);
        let rows = kb.broadcast(row, &[2, 4]);
        let col = kb.expand(v, 1);
        let cols = kb.broadcast(col, &[4, 2]);
        let cols_t = kb.permute(cols, &[1, 0]);
        let s = kb.bin(BinaryOp::Mul, rows, cols_t);
        let r = kb.reshape(s, &[8]);
        let half = kb.arange(0, 8);
        kb.bin(BinaryOp::Add, r, half)
    })
    .to_vec()
    .unwrap();
    assert_eq!(got[..8], [0, 2, 6, 12, 4, 6, 10, 16]);
}

// ---------------------------------------------------------------------------------------------
// Memory.

#[test]
fn masked_load_uses_other_and_masked_store_skips() {
    // out[i] = x[i] if i < n else -1, stored only where i is even; x has only n elements, so
    // the masked-off lanes point outside it.
    let mut kb = Kb::new("masked");
    let xp = kb.param("x", Type::ptr(F32));
    let op = kb.param("out", Type::ptr(F32));
    let n = kb.param("n", Type::scalar(I32));
    let offs = kb.arange(0, 16);
    let nb = kb.splat(n, &[16]);
    let mask = kb.cmp(CmpOp::Lt, offs, nb);
    let other = kb.constant(Literal::Float(-1.0), blk(F32, &[16]));
    let ptrs = kb.ptrs(xp, offs);
    let v = kb.load(ptrs, Some(mask), Some(other));
    let two = kb.constant(Literal::Int(2), blk(I32, &[16]));
    let zero = kb.constant(Literal::Int(0), blk(I32, &[16]));
    let rem = kb.bin(BinaryOp::Rem, offs, two);
    let even = kb.cmp(CmpOp::Eq, rem, zero);
    let ptrs = kb.ptrs(op, offs);
    kb.store(ptrs, v, Some(even));
    let kernel = kb.finish();
    let x: Vec<f32> = (0..10).map(|i| i as f32 * 1.5).collect();
    let mut buffers = [HostBuffer::from_slice(&x), HostBuffer::from_slice(&[7.0f32; 16])];
    run(
        &kernel,
        [1, 1, 1],
        &[ptr_arg(0), ptr_arg(1), ArgValue::Int(10)],
        &mut buffers,
    )
    .unwrap();
    let got: Vec<f32> = buffers[1].to_vec().unwrap();
    let want: Vec<f32> = (0..16)
        .map(|i| {
            if i % 2 == 1 {
                7.0
            } else if i < 10 {
                x[i]
            } else {
                -1.0
            }
        })
        .collect();
    assert_eq!(got, want);
}

/// `out[pid * 8 + i] = x[pid * 8 + i + shift]` over `grid` programs.
fn copy_kernel() -> Kernel {
    let mut kb = Kb::new("copy");
    let xp = kb.param("x", Type::ptr(F32));
    let op = kb.param("out", Type::ptr(F32));
    let shift = kb.param("shift", Type::scalar(I32));
    let pid = kb.pid(0);
    let eight = kb.i32c(8);
    let base = kb.bin(BinaryOp::Mul, pid, eight);
    let base = kb.bin(BinaryOp::Add, base, shift);
    let offs = kb.arange(0, 8);
    let base_b = kb.splat(base, &[8]);
    let src = kb.bin(BinaryOp::Add, offs, base_b);
    let ptrs = kb.ptrs(xp, src);
    let v = kb.load(ptrs, None, None);
    let neg = kb.unary(UnaryOp::Neg, shift);
    let neg = kb.splat(neg, &[8]);
    let dst = kb.bin(BinaryOp::Add, src, neg);
    let ptrs = kb.ptrs(op, dst);
    kb.store(ptrs, v, None);
    kb.finish()
}

#[test]
fn out_of_bounds_load_names_op_location_program_and_offset() {
    let kernel = copy_kernel();
    let mut buffers = [HostBuffer::zeros(F32, 30), HostBuffer::zeros(F32, 40)];
    let args = [ptr_arg(0), ptr_arg(1), ArgValue::Int(0)];
    let err = run(&kernel, [4, 1, 1], &args, &mut buffers).unwrap_err();
    let msg = err.to_string();
    assert!(msg.starts_with("load at "), "{msg}");
    assert!(msg.contains(file!()), "{msg}");
    assert!(msg.contains("program (3, 0, 0)"), "{msg}");
    assert!(
        msg.ends_with("element offset 30 is outside buffer 0 (`x`, 30 elements)"),
        "{msg}"
    );
    match err {
        InterpError::Fault {
            kind, op, program, loc, ..
        } => {
            assert_eq!((kind, op, program), (FaultKind::OutOfBounds, "load", [3, 0, 0]));
            assert_eq!(loc.file, file!());
        }
        e => panic!("{e:?}"),
    }
    // The first three programs ran and stored.
    assert_eq!(buffers[1].to_vec::<f32>().unwrap().len(), 40);
    // Negative offsets, through a pointer argument with an offset.
    let args = [ArgValue::Ptr { buffer: 0, offset: 2 }, ptr_arg(1), ArgValue::Int(-3)];
    let msg = run(&kernel, [1, 1, 1], &args, &mut buffers).unwrap_err().to_string();
    assert!(
        msg.ends_with("element offset -1 is outside buffer 0 (`x`, 30 elements)"),
        "{msg}"
    );
    // Stores are checked too, and name their own buffer.
    let mut buffers = [HostBuffer::zeros(F32, 64), HostBuffer::zeros(F32, 12)];
    let msg = run(
        &kernel,
        [2, 1, 1],
        &[ptr_arg(0), ptr_arg(1), ArgValue::Int(0)],
        &mut buffers,
    )
    .unwrap_err()
    .to_string();
    assert!(
        msg.starts_with("store at ") && msg.contains("program (1, 0, 0)"),
        "{msg}"
    );
    assert!(
        msg.ends_with("element offset 12 is outside buffer 1 (`out`, 12 elements)"),
        "{msg}"
    );
}

#[test]
fn argument_mismatches_are_reported() {
    let kernel = copy_kernel();
    let good = [ptr_arg(0), ptr_arg(1), ArgValue::Int(0)];
    let mut buffers = [HostBuffer::zeros(F32, 64), HostBuffer::zeros(F32, 64)];
    assert!(run(&kernel, [8, 1, 1], &good, &mut buffers).is_ok());
    let err = |args: &[ArgValue], buffers: &mut [HostBuffer]| run(&kernel, [1, 1, 1], args, buffers).unwrap_err();
    let e = err(&good[..2], &mut buffers);
    assert_eq!(
        e,
        InterpError::ArgumentCount {
            kernel: "copy".into(),
            expected: 3,
            got: 2
        }
    );
    assert_eq!(e.to_string(), "kernel `copy` takes 3 arguments, got 2");
    let e = err(&[ptr_arg(0), ArgValue::Int(0), ArgValue::Int(0)], &mut buffers).to_string();
    assert_eq!(
        e,
        "argument 1 (`out`): expected a pointer to a buffer of f32, got integer 0"
    );
    let mut wrong = [HostBuffer::zeros(F32, 64), HostBuffer::zeros(F16, 64)];
    let e = err(&good, &mut wrong).to_string();
    assert!(
        e.starts_with(
            "argument 1 (`out`): expected a pointer to a buffer of f32, got a pointer to element 0 of buffer 1 (f16"
        ),
        "{e}"
    );
    let e = err(&[ptr_arg(0), ptr_arg(5), ArgValue::Int(0)], &mut buffers).to_string();
    assert!(e.contains("there are 2 buffers"), "{e}");
    let e = err(&[ptr_arg(0), ptr_arg(1), ArgValue::Float(0.0)], &mut buffers).to_string();
    assert_eq!(e, "argument 2 (`shift`): expected an integer (i32), got float 0");
    let e = err(&[ptr_arg(0), ptr_arg(1), ArgValue::Int(1 << 40)], &mut buffers).to_string();
    assert_eq!(
        e,
        "argument 2 (`shift`): expected an integer in the range of i32, got integer 1099511627776"
    );
    let e = run(&kernel, [1, 0, 1], &good, &mut buffers).unwrap_err();
    assert_eq!(e, InterpError::EmptyGrid { grid: [1, 0, 1] });
    assert_eq!(
        HostBuffer::zeros(F32, 3).to_vec::<i32>().unwrap_err().to_string(),
        "host buffer: read as i32, but it holds f32"
    );
}

#[test]
fn atomics_apply_in_order_and_return_old_values() {
    // Every program adds 1 to hist[x[i]] for its 8 elements, and records the old values.
    let mut kb = Kb::new("histogram");
    let xp = kb.param("x", Type::ptr(I32));
    let hp = kb.param("hist", Type::ptr(I32));
    let oldp = kb.param("old", Type::ptr(I32));
    let pid = kb.pid(0);
    let eight = kb.i32c(8);
    let base = kb.bin(BinaryOp::Mul, pid, eight);
    let base = kb.splat(base, &[8]);
    let offs = kb.arange(0, 8);
    let offs = kb.bin(BinaryOp::Add, offs, base);
    let ptrs = kb.ptrs(xp, offs);
    let bins = kb.load(ptrs, None, None);
    let hptrs = kb.ptrs(hp, bins);
    let one = kb.constant(Literal::Int(1), blk(I32, &[8]));
    // Lanes with a negative bin are masked off (and point outside the histogram).
    let zero = kb.constant(Literal::Int(0), blk(I32, &[8]));
    let valid = kb.cmp(CmpOp::Ge, bins, zero);
    let old = kb.atomic(AtomicOp::Add, hptrs, one, Some(valid));
    let optrs = kb.ptrs(oldp, offs);
    kb.store(optrs, old, None);
    let kernel = kb.finish();
    let x = [0, 1, 0, 0, -1, 2, 1, 0, 3, 3, 0, -5, 1, 1, 2, 0];
    let mut buffers = [
        HostBuffer::from_slice(&x),
        HostBuffer::zeros(I32, 4),
        HostBuffer::zeros(I32, 16),
    ];
    run(&kernel, [2, 1, 1], &[ptr_arg(0), ptr_arg(1), ptr_arg(2)], &mut buffers).unwrap();
    assert_eq!(buffers[1].to_vec::<i32>().unwrap(), [6, 4, 2, 2]);
    assert_eq!(
        buffers[2].to_vec::<i32>().unwrap(),
        [0, 0, 1, 2, 0, 0, 1, 3, 0, 1, 4, 0, 2, 3, 1, 5]
    );
}

#[test]
fn atomic_cas_max_and_xchg() {
    let mut kb = Kb::new("cas");
    let p = kb.param("p", Type::ptr(F32));
    let q = kb.param("q", Type::ptr(U32));
    let offs = kb.arange(0, 4);
    let ptrs = kb.ptrs(p, offs);
    let cmp = kb.constant(Literal::Float(1.0), blk(F32, &[4]));
    let val = kb.constant(Literal::Float(9.0), blk(F32, &[4]));
    let old = kb.atomic_cas(ptrs, cmp, val);
    let m = kb.atomic(AtomicOp::Max, ptrs, old, None);
    let _ = m;
    let qptrs = kb.ptrs(q, offs);
    let big = kb.constant(Literal::Int(0xFFFF_FFF0), blk(U32, &[4]));
    let oldq = kb.atomic(AtomicOp::Max, qptrs, big, None);
    let x = kb.atomic(AtomicOp::Xchg, qptrs, oldq, None);
    let _ = x;
    let kernel = kb.finish();
    let mut buffers = [
        HostBuffer::from_slice(&[1.0f32, 2.0, f32::NAN, 1.0]),
        HostBuffer::from_slice(&[1u32, u32::MAX, 5, 0]),
    ];
    run(&kernel, [1, 1, 1], &[ptr_arg(0), ptr_arg(1)], &mut buffers).unwrap();
    // cas: 9 where the value was 1; then max(new, old) is 9, 2, NaN, 9.
    let p: Vec<f32> = buffers[0].to_vec().unwrap();
    assert_eq!([p[0], p[1], p[3]], [9.0, 2.0, 9.0]);
    assert!(p[2].is_nan());
    // max as unsigned, then exchange back the old values.
    assert_eq!(buffers[1].to_vec::<u32>().unwrap(), [1, u32::MAX, 5, 0]);
}

// ---------------------------------------------------------------------------------------------
// Control flow.

#[test]
fn for_loop_with_carried_values_and_negative_step() {
    // (sum, count) over i in 10, 7, 4, 1; then over an empty range; then count up by 2.
    let mut kb = Kb::new("loops");
    let out = kb.param("out", Type::ptr(I64));
    let start = kb.constant(Literal::Int(10), Type::scalar(I64));
    let end = kb.constant(Literal::Int(0), Type::scalar(I64));
    let step = kb.constant(Literal::Int(-3), Type::scalar(I64));
    let zero = kb.constant(Literal::Int(0), Type::scalar(I64));
    let one = kb.constant(Literal::Int(1), Type::scalar(I64));
    let r = kb.for_loop(start, end, step, &[zero, zero], |kb, i, c| {
        vec![kb.bin(BinaryOp::Add, c[0], i), kb.bin(BinaryOp::Add, c[1], one)]
    });
    let empty = kb.for_loop(end, start, step, &[one], |kb, i, c| {
        vec![kb.bin(BinaryOp::Add, c[0], i)]
    });
    let two = kb.constant(Literal::Int(2), Type::scalar(I64));
    let up = kb.for_loop(one, start, two, &[zero], |kb, i, c| {
        vec![kb.bin(BinaryOp::Add, c[0], i)]
    });
    for (k, v) in [r[0], r[1], empty[0], up[0]].into_iter().enumerate() {
        let offset = kb.constant(Literal::Int(k as i64), Type::scalar(I32));
        let p = kb.addptr(out, offset);
        kb.store(p, v, None);
    }
    let kernel = kb.finish();
    let mut buffers = [HostBuffer::zeros(I64, 4)];
    run(&kernel, [1, 1, 1], &[ptr_arg(0)], &mut buffers).unwrap();
    assert_eq!(buffers[0].to_vec::<i64>().unwrap(), [22, 4, 1, 1 + 3 + 5 + 7 + 9]);
}

#[test]
fn for_loop_with_zero_step_is_an_error() {
    let mut kb = Kb::new("zero_step");
    let n = kb.param("n", Type::scalar(I32));
    let zero = kb.i32c(0);
    let r = kb.for_loop(zero, n, zero, &[zero], |_, _, c| vec![c[0]]);
    let _ = r;
    let kernel = kb.finish();
    let e = run(&kernel, [1, 2, 1], &[ArgValue::Int(5)], &mut []).unwrap_err();
    let InterpError::Fault { kind, op, .. } = &e else {
        panic!("{e:?}")
    };
    assert_eq!((*kind, *op), (FaultKind::ZeroStep, "for"));
    let msg = e.to_string();
    assert!(
        msg.starts_with("for at ") && msg.ends_with("program (0, 0, 0): for loop step is zero"),
        "{msg}"
    );
}

#[test]
fn while_loop_counts_collatz_steps() {
    // steps(n): n -> n / 2 or 3n + 1 until 1; out[pid] = steps(x[pid]).
    let mut kb = Kb::new("collatz");
    let xp = kb.param("x", Type::ptr(I32));
    let op = kb.param("out", Type::ptr(I32));
    let pid = kb.pid(0);
    let p = kb.addptr(xp, pid);
    let n = kb.load(p, None, None);
    let zero = kb.i32c(0);
    let one = kb.i32c(1);
    let two = kb.i32c(2);
    let three = kb.i32c(3);
    let r = kb.while_loop(
        &[n, zero],
        |kb, a| kb.cmp(CmpOp::Ne, a[0], one),
        |kb, a| {
            let rem = kb.bin(BinaryOp::Rem, a[0], two);
            let odd = kb.cmp(CmpOp::Eq, rem, one);
            let half = kb.bin(BinaryOp::Div, a[0], two);
            let t = kb.bin(BinaryOp::Mul, a[0], three);
            let t = kb.bin(BinaryOp::Add, t, one);
            let next = kb.select(odd, t, half);
            vec![next, kb.bin(BinaryOp::Add, a[1], one)]
        },
    );
    let p = kb.addptr(op, pid);
    kb.store(p, r[1], None);
    let kernel = kb.finish();
    let mut buffers = [HostBuffer::from_slice(&[27i32, 1, 6, 7]), HostBuffer::zeros(I32, 4)];
    run(&kernel, [4, 1, 1], &[ptr_arg(0), ptr_arg(1)], &mut buffers).unwrap();
    assert_eq!(buffers[1].to_vec::<i32>().unwrap(), [111, 0, 8, 16]);
}

#[test]
fn if_with_results_and_program_ids() {
    // out[pid0 + 2 * pid1] = pid0 == 1 ? 100 + pid1 : -num_programs(1), and an if without an
    // else that stores only on program (0, 1).
    let mut kb = Kb::new("branches");
    let op = kb.param("out", Type::ptr(I32));
    let flag = kb.param("flag", Type::ptr(Bool));
    let p0 = kb.pid(0);
    let p1 = kb.pid(1);
    let one = kb.i32c(1);
    let is_one = kb.cmp(CmpOp::Eq, p0, one);
    let r = kb.if_else(
        is_one,
        &[Type::scalar(I32)],
        |kb| {
            let c = kb.i32c(100);
            vec![kb.bin(BinaryOp::Add, c, p1)]
        },
        Some(Box::new(|kb: &mut Kb| {
            let n = kb.op(Op::NumPrograms { axis: 1 }, Type::scalar(I32));
            vec![kb.unary(UnaryOp::Neg, n)]
        })),
    );
    let two = kb.i32c(2);
    let row = kb.bin(BinaryOp::Mul, p1, two);
    let idx = kb.bin(BinaryOp::Add, p0, row);
    let p = kb.addptr(op, idx);
    kb.store(p, r[0], None);
    let zero = kb.i32c(0);
    let a = kb.cmp(CmpOp::Eq, p0, zero);
    let b = kb.cmp(CmpOp::Eq, p1, one);
    let both = kb.bin(BinaryOp::And, a, b);
    kb.if_else(
        both,
        &[],
        |kb| {
            let t = kb.constant(Literal::Bool(true), Type::scalar(Bool));
            kb.store(flag, t, None);
            vec![]
        },
        None,
    );
    let kernel = kb.finish();
    let mut buffers = [HostBuffer::zeros(I32, 6), HostBuffer::from_bools(&[false])];
    run(&kernel, [2, 3, 1], &[ptr_arg(0), ptr_arg(1)], &mut buffers).unwrap();
    assert_eq!(buffers[0].to_vec::<i32>().unwrap(), [-3, 100, -3, 101, -3, 102]);
    assert_eq!(buffers[1].to_bools().unwrap(), [true]);
}

#[test]
fn use_before_definition_is_invalid_ir() {
    let mut kb = Kb::new("bad");
    let out = kb.param("out", Type::ptr(I32));
    let a = kb.i32c(1);
    let b = kb.bin(BinaryOp::Add, a, a);
    // Move the add before the constant.
    kb.regions[0].insts.swap(0, 1);
    kb.store(out, b, None);
    let kernel = kb.finish_unverified();
    // The verifier refuses it before any program runs...
    match run(&kernel, [1, 1, 1], &[ptr_arg(0)], &mut [HostBuffer::zeros(I32, 1)]) {
        Err(e @ InterpError::Invalid(_)) => assert!(e.to_string().contains("not defined before this use"), "{e}"),
        other => panic!("expected the verifier's error, got {other:?}"),
    }
    // ... and without it the interpreter faults where it meets the use.
    let e = run_unverified(&kernel, [1, 1, 1], &[ptr_arg(0)], &mut [HostBuffer::zeros(I32, 1)]).unwrap_err();
    let InterpError::Fault { kind, op, .. } = &e else {
        panic!("{e:?}")
    };
    assert_eq!((*kind, *op), (FaultKind::InvalidIr, "add"));
    assert!(e.to_string().contains("used before it is defined"), "{e}");
}

// ---------------------------------------------------------------------------------------------
// Dot.

/// `c = a @ b + acc` in one program, with `a: [m, k]`, `b: [k, n]` and an f32 or i32 `acc`.
fn run_dot(a: HostBuffer, b: HostBuffer, acc: HostBuffer, m: u32, k: u32, n: u32) -> HostBuffer {
    run_dot_with(a, b, acc, (m, k, n), crate::ir::DotPrecision::Ieee)
}

/// [`run_dot`] at input precision `precision`.
fn run_dot_with(
    a: HostBuffer,
    b: HostBuffer,
    acc: HostBuffer,
    (m, k, n): (u32, u32, u32),
    precision: crate::ir::DotPrecision,
) -> HostBuffer {
    let mut kb = Kb::new("dot");
    let ap = kb.param("a", Type::ptr(a.elem()));
    let bp = kb.param("b", Type::ptr(b.elem()));
    let cp = kb.param("c", Type::ptr(acc.elem()));
    let load = |kb: &mut Kb, p, r: u32, c: u32| {
        let offs = kb.arange(0, (r * c) as i32);
        let offs = kb.reshape(offs, &[r, c]);
        let ptrs = kb.ptrs(p, offs);
        (ptrs, kb.load(ptrs, None, None))
    };
    let (_, av) = load(&mut kb, ap, m, k);
    let (_, bv) = load(&mut kb, bp, k, n);
    let (cptrs, cv) = load(&mut kb, cp, m, n);
    let d = kb.dot_with(av, bv, cv, precision);
    kb.store(cptrs, d, None);
    // The typing rules admit float dots only; the interpreter also runs integer ones.
    let kernel = if a.elem().is_int() {
        kb.finish_unverified()
    } else {
        kb.finish()
    };
    let mut buffers = [a, b, acc];
    run_unverified(&kernel, [1, 1, 1], &[ptr_arg(0), ptr_arg(1), ptr_arg(2)], &mut buffers).unwrap();
    let [_, _, c] = buffers;
    c
}

#[test]
fn dot_matches_a_naive_reference() {
    let (m, k, n) = (16usize, 32usize, 16usize);
    let mut rng = Rng::new(6);
    let a: Vec<f16> = rng.f16s(m * k, -2.0, 2.0);
    let b: Vec<f16> = rng.f16s(k * n, -2.0, 2.0);
    let acc = rng.f32s(m * n, -4.0, 4.0);
    let got: Vec<f32> = run_dot(
        HostBuffer::from_slice(&a),
        HostBuffer::from_slice(&b),
        HostBuffer::from_slice(&acc),
        16,
        32,
        16,
    )
    .to_vec()
    .unwrap();
    let mut want = acc.clone();
    for i in 0..m {
        for j in 0..n {
            for kk in 0..k {
                want[i * n + j] += a[i * k + kk].to_f32() * b[kk * n + j].to_f32();
            }
        }
    }
    assert_eq!(bits32(&got), bits32(&want));
    // f32 inputs: a fused multiply-add per step.
    let a = rng.f32s(m * k, -2.0, 2.0);
    let b = rng.f32s(k * n, -2.0, 2.0);
    let got: Vec<f32> = run_dot(
        HostBuffer::from_slice(&a),
        HostBuffer::from_slice(&b),
        HostBuffer::from_slice(&acc),
        16,
        32,
        16,
    )
    .to_vec()
    .unwrap();
    let mut want = acc.clone();
    for i in 0..m {
        for j in 0..n {
            for kk in 0..k {
                want[i * n + j] = a[i * k + kk].mul_add(b[kk * n + j], want[i * n + j]);
            }
        }
    }
    assert_eq!(bits32(&got), bits32(&want));
    // i8 into i32.
    let a: Vec<i8> = (0..m * k).map(|_| rng.next_u64() as i8).collect();
    let b: Vec<i8> = (0..k * n).map(|_| rng.next_u64() as i8).collect();
    let acc: Vec<i32> = (0..m * n).map(|_| rng.next_u64() as i32 >> 8).collect();
    let got: Vec<i32> = run_dot(
        HostBuffer::from_slice(&a),
        HostBuffer::from_slice(&b),
        HostBuffer::from_slice(&acc),
        16,
        32,
        16,
    )
    .to_vec()
    .unwrap();
    let mut want = acc.clone();
    for i in 0..m {
        for j in 0..n {
            for kk in 0..k {
                want[i * n + j] = want[i * n + j].wrapping_add(a[i * k + kk] as i32 * b[kk * n + j] as i32);
            }
        }
    }
    assert_eq!(got, want);
}

/// tf32 rounding (`cvt.rna.tf32.f32`): to nearest, ties away from zero (not to even), on
/// the 13 low mantissa bits, with carries into the exponent and past the largest finite
/// value; infinities, NaNs and zeros kept, subnormals rounded alike.
#[test]
fn tf32_rounding_is_to_nearest_ties_away() {
    use crate::ir::round_to_tf32 as r;
    let p = |e: i32| 2f32.powi(e);
    // Below, at and above half of tf32's unit (2^-10 at 1): a tie goes away from zero.
    assert_eq!(r(1.0 + p(-12) + p(-20)), 1.0);
    assert_eq!(r(1.0 + p(-11)), 1.0 + p(-10));
    assert_eq!(r(-(1.0 + p(-11))), -(1.0 + p(-10)));
    assert_eq!(r(1.0 + p(-11) + p(-20)), 1.0 + p(-10));
    assert_eq!(r(1.0 + p(-10) + p(-11)), 1.0 + p(-9));
    // Exact tf32 values stay; the carry reaches the exponent; overflow gives infinity.
    assert_eq!(r(1.5), 1.5);
    assert_eq!(r(2.0 - p(-12)), 2.0);
    assert_eq!(r(f32::MAX), f32::INFINITY);
    assert_eq!(r(-f32::MAX), f32::NEG_INFINITY);
    for x in [0.0f32, -0.0, f32::INFINITY, f32::NEG_INFINITY] {
        assert_eq!(r(x).to_bits(), x.to_bits());
    }
    assert!(r(f32::NAN).is_nan());
    assert!(
        r(f32::from_bits(0x7f80_0001)).is_nan(),
        "a NaN with only low payload bits"
    );
    // A subnormal: its unit is 2^-149; tf32 keeps multiples of 2^-136.
    assert_eq!(r(f32::from_bits(0x0000_1000)), f32::from_bits(0x0000_2000));
    assert_eq!(r(f32::from_bits(0x0000_0fff)), 0.0);
}

/// A `dot` at input precision tf32 multiplies its operands rounded to tf32 (ties away from
/// zero), where the default multiplies them as they are; the accumulator is not rounded.
#[test]
fn tf32_dot_rounds_its_operands() {
    use crate::ir::DotPrecision::{Ieee, Tf32};
    let (m, k, n) = (16usize, 16usize, 16usize);
    let p = |e: i32| 2f32.powi(e);
    // Column 0 of `a` holds values whose low mantissa bits are set, `b`'s row 0 is
    // 1 + 2^-11 (a tie: 1 + 2^-10 in tf32), everything else 0; the accumulator has low
    // bits of its own.
    let specials = [
        1.0 + p(-11),
        -(1.0 + p(-11)),
        1.0 + p(-12) + p(-20),
        3.0 + p(-9) + p(-15),
    ];
    let mut a = vec![0.0f32; m * k];
    for i in 0..m {
        a[i * k] = specials[i % specials.len()] * (i + 1) as f32;
    }
    let mut b = vec![0.0f32; k * n];
    b[..n].fill(1.0 + p(-11));
    let acc: Vec<f32> = (0..m * n).map(|i| p(-20) * i as f32 + 1.0 + p(-23)).collect();
    let run = |precision| -> Vec<f32> {
        run_dot_with(
            HostBuffer::from_slice(&a),
            HostBuffer::from_slice(&b),
            HostBuffer::from_slice(&acc),
            (m as u32, k as u32, n as u32),
            precision,
        )
        .to_vec()
        .unwrap()
    };
    let (tf32, ieee) = (run(Tf32), run(Ieee));
    for i in 0..m {
        for j in 0..n {
            let (x, y, c) = (a[i * k], b[j], acc[i * n + j]);
            let want = crate::ir::round_to_tf32(x).mul_add(crate::ir::round_to_tf32(y), c);
            assert_eq!(tf32[i * n + j].to_bits(), want.to_bits(), "({i}, {j})");
            assert_eq!(ieee[i * n + j].to_bits(), x.mul_add(y, c).to_bits(), "({i}, {j})");
        }
    }
    // Row 0: (1 + 2^-11)^2 unrounded, (1 + 2^-10)^2 = 1 + 2^-9 + 2^-20 in tf32.
    assert_eq!(tf32[0], (1.0 + p(-9) + p(-20)) + acc[0]);
    assert_ne!(tf32, ieee);
}

/// The tiled matmul of Triton's tutorial: `c[M, N] = a[M, K] @ b[K, N]` in f16 with f32
/// accumulation, one `bm x bn` tile per program, stepping `bk` along K.
pub(super) fn matmul_kernel(bm: u32, bn: u32, bk: u32) -> Kernel {
    let mut kb = Kb::new("matmul");
    let a = kb.param("a", Type::ptr(F16));
    let b = kb.param("b", Type::ptr(F16));
    let c = kb.param("c", Type::ptr(F16));
    let m = kb.param("M", Type::scalar(I32));
    let n = kb.param("N", Type::scalar(I32));
    let k = kb.param("K", Type::scalar(I32));
    let pid_m = kb.pid(0);
    let pid_n = kb.pid(1);
    let tile = |kb: &mut Kb, pid, size: u32| {
        let s = kb.i32c(size as i32);
        let base = kb.bin(BinaryOp::Mul, pid, s);
        let base = kb.splat(base, &[size]);
        let r = kb.arange(0, size as i32);
        kb.bin(BinaryOp::Add, base, r)
    };
    let offs_m = tile(&mut kb, pid_m, bm);
    let offs_n = tile(&mut kb, pid_n, bn);
    let offs_k = kb.arange(0, bk as i32);
    // a_ptrs = a + offs_m[:, None] * K + offs_k[None, :]
    let grid2 = |kb: &mut Kb, rows: ValueId, stride: ValueId, cols: ValueId, r: u32, c: u32| {
        let rows = kb.expand(rows, 1);
        let rows = kb.broadcast(rows, &[r, c]);
        let stride = kb.splat(stride, &[r, c]);
        let rows = kb.bin(BinaryOp::Mul, rows, stride);
        let cols = kb.expand(cols, 0);
        let cols = kb.broadcast(cols, &[r, c]);
        kb.bin(BinaryOp::Add, rows, cols)
    };
    let a_offs = grid2(&mut kb, offs_m, k, offs_k, bm, bk);
    let a_ptrs = kb.ptrs(a, a_offs);
    let b_offs = grid2(&mut kb, offs_k, n, offs_n, bk, bn);
    let b_ptrs = kb.ptrs(b, b_offs);
    let acc = kb.constant(Literal::Float(0.0), blk(F32, &[bm, bn]));
    let zero = kb.i32c(0);
    let step = kb.i32c(bk as i32);
    let r = kb.for_loop(zero, k, step, &[acc, a_ptrs, b_ptrs], |kb, _, c| {
        let av = kb.load(c[1], None, None);
        let bv = kb.load(c[2], None, None);
        let acc = kb.dot(av, bv, c[0]);
        let a_step = kb.constant(Literal::Int(bk as i64), blk(I32, &[bm, bk]));
        let a_next = kb.addptr(c[1], a_step);
        let kn = kb.i32c(bk as i32);
        let kn = kb.bin(BinaryOp::Mul, kn, n);
        let b_step = kb.splat(kn, &[bk, bn]);
        let b_next = kb.addptr(c[2], b_step);
        vec![acc, a_next, b_next]
    });
    let out = kb.cast(r[0], F16);
    let c_offs = grid2(&mut kb, offs_m, n, offs_n, bm, bn);
    let c_ptrs = kb.ptrs(c, c_offs);
    // Mask rows and columns past M and N.
    let mb = kb.splat(m, &[bm]);
    let nb = kb.splat(n, &[bn]);
    let mrow = kb.cmp(CmpOp::Lt, offs_m, mb);
    let ncol = kb.cmp(CmpOp::Lt, offs_n, nb);
    let mrow = kb.expand(mrow, 1);
    let mrow = kb.broadcast(mrow, &[bm, bn]);
    let ncol = kb.expand(ncol, 0);
    let ncol = kb.broadcast(ncol, &[bm, bn]);
    let mask = kb.bin(BinaryOp::And, mrow, ncol);
    kb.store(c_ptrs, out, Some(mask));
    kb.finish()
}

/// Runs `matmul_kernel` on random f16 inputs; returns (a, b, c).
pub(super) fn run_matmul(size: usize, bm: u32, bn: u32, bk: u32) -> (Vec<f16>, Vec<f16>, Vec<f16>) {
    let kernel = matmul_kernel(bm, bn, bk);
    let mut rng = Rng::new(7);
    let a: Vec<f16> = rng.f16s(size * size, -1.0, 1.0);
    let b: Vec<f16> = rng.f16s(size * size, -1.0, 1.0);
    let mut buffers = [
        HostBuffer::from_slice(&a),
        HostBuffer::from_slice(&b),
        HostBuffer::zeros(F16, size * size),
    ];
    let s = ArgValue::Int(size as i64);
    let grid = [size as u32 / bm, size as u32 / bn, 1];
    run(
        &kernel,
        grid,
        &[ptr_arg(0), ptr_arg(1), ptr_arg(2), s, s, s],
        &mut buffers,
    )
    .unwrap();
    let c = buffers[2].to_vec().unwrap();
    (a, b, c)
}

#[test]
fn tiled_matmul_matches_reference() {
    let size = 64;
    let (a, b, c) = run_matmul(size, 32, 16, 16);
    for i in 0..size {
        for j in 0..size {
            let mut acc = 0f32;
            for k in 0..size {
                acc += a[i * size + k].to_f32() * b[k * size + j].to_f32();
            }
            assert_eq!(c[i * size + j], f16::from_f32(acc), "c[{i}, {j}]");
        }
    }
}

/// A kernel's fields are public; one edited into invalid IR is refused before any program
/// runs, with the verifier's words, instead of faulting (or not) midway.
#[test]
fn an_edited_invalid_kernel_is_refused() {
    let mut kernel = crate::seeds::vector_add(F32, 128).unwrap();
    let load = kernel
        .insts
        .iter()
        .find_map(|(_, i)| matches!(i.op, Op::Load { .. }).then(|| i.results[0]))
        .unwrap();
    kernel.values[load].ty.elem = Elem::Ptr(F32);
    let mut buffers = [
        HostBuffer::zeros(F32, 4),
        HostBuffer::zeros(F32, 4),
        HostBuffer::zeros(F32, 4),
    ];
    let args = [ptr_arg(0), ptr_arg(1), ptr_arg(2), ArgValue::Int(4)];
    match run(&kernel, [1, 1, 1], &args, &mut buffers) {
        Err(e @ InterpError::Invalid(_)) => assert!(e.to_string().contains("`load`"), "{e}"),
        other => panic!("expected the verifier's error, got {other:?}"),
    }
}
