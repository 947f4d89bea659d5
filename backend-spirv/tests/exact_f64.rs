//! f64 arithmetic reaches the driver marked `NoContraction` (the `exact_f64` pass), and
//! f32 arithmetic does not: the words spirv-val accepts, with one decoration for each f64
//! add, subtract, multiply or divide and none on the f32 ones.

mod common;

use rspirv::dr::Operand;
use rspirv::spirv::{Decoration, Op};
use rutile_ir::lower::lower;
use rutile_ir::target::{Specialization, Target};
use rutile_ir::{Kernel, ScalarType};
use rutile_spirv::SpirvTarget;
use std::collections::{HashMap, HashSet};

/// `out64 = (a·b + a) / b - a` in f64 and `out32 = x·y + x` in f32, one element a thread.
fn mixed_kernel() -> rutile_ir::thread::ThreadKernel {
    let kernel = Kernel::build("mixed_precision", |k| {
        let (a, b, o) = (
            k.arg_ptr("a", ScalarType::F64),
            k.arg_ptr("b", ScalarType::F64),
            k.arg_ptr("out64", ScalarType::F64),
        );
        let (x, y, p) = (
            k.arg_ptr("x", ScalarType::F32),
            k.arg_ptr("y", ScalarType::F32),
            k.arg_ptr("out32", ScalarType::F32),
        );
        let i = k.arange(0, 64);
        let (va, vb) = (k.load(a + i), k.load(b + i));
        k.store(o + i, (va * vb + va) / vb - va);
        let (vx, vy) = (k.load(x + i), k.load(y + i));
        k.store(p + i, vx * vy + vx);
    })
    .unwrap();
    let target = Target::vulkan(32, 2, 32 * 1024);
    lower(&kernel, &target, &Specialization::all(6)).unwrap()
}

/// The result types of the arithmetic decorated `NoContraction`, and of the arithmetic not.
fn decorated_types(words: &[u32]) -> (Vec<u32>, Vec<u32>) {
    let module = rspirv::dr::load_words(words).unwrap();
    let marked: HashSet<u32> = module
        .annotations
        .iter()
        .filter_map(|a| match a.operands.as_slice() {
            [Operand::IdRef(id), Operand::Decoration(Decoration::NoContraction)] => Some(*id),
            _ => None,
        })
        .collect();
    let widths: HashMap<u32, u32> = module
        .types_global_values
        .iter()
        .filter(|i| i.class.opcode == Op::TypeFloat)
        .filter_map(|i| match i.operands.first() {
            Some(Operand::LiteralBit32(w)) => Some((i.result_id.unwrap(), *w)),
            _ => None,
        })
        .collect();
    let (mut on, mut off) = (Vec::new(), Vec::new());
    for i in module
        .functions
        .iter()
        .flat_map(|f| f.blocks.iter().flat_map(|b| b.instructions.iter()))
    {
        if matches!(i.class.opcode, Op::FAdd | Op::FSub | Op::FMul | Op::FDiv) {
            let width = widths.get(&i.result_type.unwrap()).copied().unwrap_or(0);
            if marked.contains(&i.result_id.unwrap()) {
                on.push(width);
            } else {
                off.push(width);
            }
        }
    }
    (on, off)
}

#[test]
fn f64_arithmetic_is_marked_and_f32_is_not() {
    let (sk, _) = common::check(&mixed_kernel(), &SpirvTarget::full(32));
    assert!(sk.exact_f64 && sk.needs_own_words());
    let (on, off) = decorated_types(&sk.spirv_words_hinted().unwrap());
    // Two multiplies or adds, a division and a subtraction a thread in f64 at least.
    assert!(on.len() >= 4 && on.iter().all(|&w| w == 64), "marked: {on:?}");
    assert!(!off.is_empty() && off.iter().all(|&w| w != 64), "not marked: {off:?}");
    // naga's own words carry none (they are what a device without passthrough gets).
    assert!(decorated_types(&sk.spirv_words().unwrap()).0.is_empty());
}

#[test]
fn kernels_without_f64_do_not_need_own_words_for_it() {
    let (sk, _) = common::check(&common::vector_add(ScalarType::F32), &SpirvTarget::full(32));
    assert!(!sk.exact_f64);
    let (on, _) = decorated_types(&sk.spirv_words_hinted().unwrap());
    assert!(on.is_empty());
}
