//! Malformed kernels: each gives an error that names the op, the author's line and the
//! reason; none panics.

use rutile_ir::{BuildError, Kernel, KernelBuilder, ScalarType::*, Type, Value};

/// Builds a kernel expected to fail; returns the error and the line of the closure's
/// marked op (the line after the call to `here()`).
fn fails(body: impl FnOnce(&KernelBuilder)) -> BuildError {
    match Kernel::build("bad", body) {
        Ok(k) => panic!("expected an error, built:\n{k}"),
        Err(e) => e,
    }
}

/// Asserts the one error names `op`, this test file, and contains each of `words`.
#[track_caller]
fn assert_error(e: &BuildError, op: &str, words: &[&str]) {
    assert_eq!(e.diagnostics.len(), 1, "expected one error, got:\n{e}");
    let d = e.first();
    assert_eq!(d.op, op, "wrong op in: {e}");
    assert!(
        d.loc.file.ends_with("bad_kernels.rs"),
        "location should be the author's line: {e}"
    );
    for w in words {
        assert!(d.message.contains(w), "message lacks {w:?}: {e}");
    }
    // The rendered error carries all three parts.
    let text = e.to_string();
    assert!(
        text.contains(&format!("`{op}`")) && text.contains("bad_kernels.rs:"),
        "{text}"
    );
}

#[test]
fn arange_of_non_power_of_two_length() {
    let e = fails(|k| {
        k.arange(0, 100);
    });
    assert_error(&e, "arange", &["100", "power of two"]);
}

#[test]
fn arange_reports_the_authors_line() {
    let line = line!() + 2;
    let e = fails(|k| {
        k.arange(0, 100);
    });
    assert_eq!(e.first().loc.line, line);
}

#[test]
fn binary_shape_mismatch() {
    let e = fails(|k| {
        let a = k.arange(0, 64);
        let b = k.arange(0, 32);
        let _ = a + b;
    });
    assert_error(&e, "add", &["[64]", "[32]", "broadcast"]);
}

#[test]
fn load_mask_of_wrong_shape() {
    let e = fails(|k| {
        let x = k.arg_ptr("x", F32);
        let offs = k.arange(0, 64);
        let mask = k.arange(0, 32).lt(10);
        let _ = k.load_masked(x + offs, mask, 0.0);
    });
    assert_error(&e, "load", &["broadcast"]);
}

#[test]
fn store_through_a_non_pointer() {
    let e = fails(|k| {
        let n = k.arg_i32("n");
        let offs = k.arange(0, 16);
        k.store(n + offs, 1.0);
    });
    assert_error(&e, "store", &["pointer", "<16xi32>"]);
}

#[test]
fn load_from_a_non_pointer() {
    let e = fails(|k| {
        let x = k.arange(0, 16);
        let _ = k.load(x);
    });
    assert_error(&e, "load", &["pointer", "<16xi32>"]);
}

#[test]
fn reduction_axis_out_of_range() {
    let e = fails(|k| {
        let x = k.arange(0, 16);
        let _ = x.sum(1);
    });
    assert_error(&e, "sum", &["axis 1", "rank 1"]);
}

#[test]
fn loop_carried_value_changes_type() {
    let e = fails(|k| {
        let acc = k.zeros(&[16], F32);
        k.for_range(0, 10, 1, &[acc], |_, c| vec![c[0].to(F16)]);
    });
    assert_error(&e, "for", &["loop-carried value 0", "<16xf32>", "<16xf16>"]);
}

#[test]
fn loop_body_gives_wrong_number_of_values() {
    let e = fails(|k| {
        let acc = k.zeros(&[16], F32);
        k.for_range(0, 10, 1, &[acc], |_, _| vec![]);
    });
    assert_error(&e, "for", &["gives 0 values, expected 1"]);
}

#[test]
fn float_loop_bounds() {
    let e = fails(|k| {
        k.for_each(0, 1.5, 1, |_| {});
    });
    assert_error(&e, "for", &["integer scalars", "f32"]);
}

#[test]
fn if_branches_of_different_types() {
    let e = fails(|k| {
        let c = k.program_id(0).eq(0);
        k.if_else(c, || vec![k.scalar(1, I32)], || vec![k.scalar(1.0, F32)]);
    });
    assert_error(&e, "if", &["else-branch result 0", "i32", "f32"]);
}

#[test]
fn if_condition_is_a_block() {
    let e = fails(|k| {
        let c = k.arange(0, 16).lt(3);
        k.if_then(c, || {});
    });
    assert_error(&e, "if", &["i1 scalar", "<16xi1>"]);
}

#[test]
fn value_escaping_its_loop() {
    let e = fails(|k| {
        let mut inner = None;
        k.for_each(0, 4, 1, |i| inner = Some(i * 2));
        let _ = inner.unwrap() + 1;
    });
    assert_error(&e, "add", &["loop or branch body that has ended"]);
}

#[test]
fn dot_inner_dimensions_differ() {
    let e = fails(|k| {
        let a = k.zeros(&[32, 16], F16);
        let b = k.zeros(&[32, 32], F16);
        let _ = k.dot(a, b);
    });
    assert_error(&e, "dot", &["inner dimensions differ"]);
}

#[test]
fn dot_too_small() {
    let e = fails(|k| {
        let a = k.zeros(&[8, 16], F16);
        let b = k.zeros(&[16, 16], F16);
        let _ = k.dot(a, b);
    });
    assert_error(&e, "dot", &["at least 16", "M=8"]);
}

#[test]
fn dot_of_mixed_input_types() {
    let e = fails(|k| {
        let a = k.zeros(&[16, 16], F16);
        let b = k.zeros(&[16, 16], F32);
        let _ = k.dot(a, b);
    });
    assert_error(&e, "dot", &["same element type", "f16", "f32"]);
    // The two fp8 formats mix, with each other only; fp8 accumulates in f32 only.
    let e = fails(|k| {
        let a = k.zeros(&[16, 32], rutile_ir::ScalarType::F8E4M3);
        let b = k.zeros(&[32, 16], F16);
        let _ = k.dot(a, b);
    });
    assert_error(&e, "dot", &["same element type", "f8e4m3", "f16"]);
    let e = fails(|k| {
        let a = k.zeros(&[16, 32], rutile_ir::ScalarType::F8E5M2);
        let b = k.zeros(&[32, 16], rutile_ir::ScalarType::F8E5M2);
        let _ = k.dot_acc(a, b, k.zeros(&[16, 16], F16));
    });
    assert_error(
        &e,
        "dot",
        &["fp8/f16/bf16/f32 inputs with an f32 accumulator", "f8e5m2", "f16"],
    );
}

/// `max_num_imprecise_acc` past the dot's K is refused for fp8 operands, as Triton refuses
/// it (the sums are promoted within one dot); other operand types ignore it, as Triton's.
#[test]
fn dot_promoting_past_its_k() {
    let options = rutile_ir::DotOptions {
        max_num_imprecise_acc: Some(128),
        ..Default::default()
    };
    let e = fails(|k| {
        let a = k.zeros(&[16, 64], rutile_ir::ScalarType::F8E4M3);
        let b = k.zeros(&[64, 16], rutile_ir::ScalarType::F8E4M3);
        let _ = k.dot_with_options(a, b, k.zeros(&[16, 16], F32), options);
    });
    assert_error(&e, "dot", &["max_num_imprecise_acc (128)", "at most the dot's K (64)"]);
    rutile_ir::Kernel::build("f16_dot", |k| {
        let a = k.zeros(&[16, 64], F16);
        let b = k.zeros(&[64, 16], F16);
        let _ = k.dot_with_options(a, b, k.zeros(&[16, 16], F32), options);
    })
    .expect("an f16 dot ignores the limit");
}

/// `dot_scaled` names what is wrong with its operands: a format the block's type cannot
/// hold, K differing between the sides (fp4 holds two values a byte), scales of the wrong
/// shape or type, K not a multiple of 32 where an operand has scales.
#[test]
fn dot_scaled_of_wrong_operands() {
    use rutile_ir::{Microscaled, MxFormat};
    let e = fails(|k| {
        let (a, b) = (k.zeros(&[16, 32], F16), k.zeros(&[32, 16], U8));
        let _ = k.dot_scaled(
            Microscaled::new(a, None, MxFormat::E4M3),
            Microscaled::new(b, None, MxFormat::E4M3),
            None,
        );
    });
    assert_error(
        &e,
        "dot_scaled",
        &["left operand in format e4m3", "f8e4m3, or its bits as u8", "f16"],
    );
    let e = fails(|k| {
        let (a, b) = (k.zeros(&[16, 32], U8), k.zeros(&[32, 16], U8));
        let _ = k.dot_scaled(
            Microscaled::new(a, None, MxFormat::E2M1),
            Microscaled::new(b, None, MxFormat::E5M2),
            None,
        );
    });
    assert_error(&e, "dot_scaled", &["K differs", "(e2m1) holds 64", "(e5m2) 32"]);
    // Blocks below `dot`'s 16, fp4's K from 4 bytes a row: named as `dot_scaled`'s.
    let e = fails(|k| {
        let (a, b) = (k.zeros(&[16, 4], U8), k.zeros(&[8, 16], F16));
        let _ = k.dot_scaled(
            Microscaled::new(a, None, MxFormat::E2M1),
            Microscaled::new(b, None, MxFormat::Fp16),
            None,
        );
    });
    assert_error(&e, "dot_scaled", &["at least 16", "M=16, N=16, K=8"]);
    let e = fails(|k| {
        let (a, b) = (k.zeros(&[16, 32], U8), k.zeros(&[32, 16], U8));
        let sb = k.zeros(&[2, 16], U8);
        let _ = k.dot_scaled(
            Microscaled::new(a, None, MxFormat::E2M1),
            Microscaled::new(b, Some(sb), MxFormat::E2M1),
            None,
        );
    });
    assert_error(&e, "dot_scaled", &["right operand's scales", "[16, 2]", "<2x16xu8>"]);
    let e = fails(|k| {
        let (a, b) = (k.zeros(&[16, 16], BF16), k.zeros(&[16, 16], BF16));
        let sa = k.zeros(&[16, 1], U8);
        let _ = k.dot_scaled(
            Microscaled::new(a, Some(sa), MxFormat::Bf16),
            Microscaled::new(b, None, MxFormat::Bf16),
            None,
        );
    });
    assert_error(&e, "dot_scaled", &["K (16) must be a multiple of 32"]);
    // Only fp4 packs values, so only it may be packed along M or N.
    let e = fails(|k| {
        let (a, b) = (k.zeros(&[16, 32], U8), k.zeros(&[32, 16], U8));
        let _ = k.dot_scaled(
            Microscaled::new(a, None, MxFormat::E2M1),
            Microscaled::new(b, None, MxFormat::E4M3).packed_along_m_or_n(),
            None,
        );
    });
    assert_error(
        &e,
        "dot_scaled",
        &["right operand is packed along N", "only e2m1", "e4m3"],
    );
    // Packed along M, the left block's rows are half of M: K must still agree.
    let e = fails(|k| {
        let (a, b) = (k.zeros(&[8, 16], U8), k.zeros(&[32, 16], BF16));
        let _ = k.dot_scaled(
            Microscaled::new(a, None, MxFormat::E2M1).packed_along_m_or_n(),
            Microscaled::new(b, None, MxFormat::Bf16),
            None,
        );
    });
    assert_error(&e, "dot_scaled", &["K differs", "(e2m1) holds 16", "(bf16) 32"]);
}

#[test]
fn transcendental_of_an_integer() {
    let e = fails(|k| {
        let _ = k.arange(0, 16).exp();
    });
    assert_error(&e, "exp", &["float", "<16xi32>"]);
}

#[test]
fn bit_counts_of_floats_and_booleans() {
    type Op = for<'b> fn(Value<'b>) -> Value<'b>;
    let ops: [(&str, Op); 4] = [
        ("popc", |x| x.popc()),
        ("clz", |x| x.clz()),
        ("brev", |x| x.brev()),
        ("ffs", |x| x.ffs()),
    ];
    for (name, f) in ops {
        let e = fails(|k| {
            let _ = f(k.zeros(&[16], F32));
        });
        assert_error(&e, name, &["integer operand", "<16xf32>"]);
        let e = fails(|k| {
            let _ = f(k.arange(0, 16).lt(3));
        });
        assert_error(&e, name, &["integer operand", "<16xi1>"]);
    }
}

#[test]
fn bitwise_op_on_floats() {
    let e = fails(|k| {
        let x = k.zeros(&[16], F32);
        let _ = x & x;
    });
    assert_error(&e, "and", &["integer or boolean", "<16xf32>"]);
}

#[test]
fn division_without_ieee_rounding_of_integers() {
    let e = fails(|k| {
        let i = k.arange(0, 16);
        let _ = i.fdiv(i, false);
    });
    assert_error(&e, "div_full", &["float operands", "<16xi32>"]);
}

#[test]
fn reshape_to_another_size() {
    let e = fails(|k| {
        let _ = k.arange(0, 64).reshape(&[4, 8]);
    });
    assert_error(&e, "reshape", &["64 elements", "32 elements"]);
}

#[test]
fn reshape_to_rank_four() {
    let e = fails(|k| {
        let _ = k.arange(0, 16).reshape(&[2, 2, 2, 2]);
    });
    assert_error(&e, "reshape", &["rank at most 3"]);
}

#[test]
fn full_of_non_power_of_two_shape() {
    let e = fails(|k| {
        let _ = k.full(&[3, 4], 1.0, F32);
    });
    assert_error(&e, "full", &["powers of two", "[3, 4]"]);
}

// Blocks of more than 2^20 elements (Triton's limit) are errors; their sizes overflowed the
// lowering's and the interpreter's counts (a panic) before.

#[test]
fn full_of_too_many_elements() {
    let e = fails(|k| {
        let _ = k.zeros(&[1 << 16, 1 << 16], F32);
    });
    assert_error(
        &e,
        "full",
        &["at most 1048576 elements", "[65536, 65536]", "4294967296 elements"],
    );
}

#[test]
fn arange_of_too_many_elements() {
    let e = fails(|k| {
        let _ = k.arange(i32::MIN, 0);
    });
    assert_error(&e, "arange", &["at most 1048576 elements", "[2147483648]"]);
}

#[test]
fn reshape_whose_size_overflows() {
    let e = fails(|k| {
        let _ = k.arange(0, 16).reshape(&[1 << 31, 1 << 31, 1 << 31]);
    });
    assert_error(
        &e,
        "reshape",
        &["at most 1048576 elements", "[2147483648, 2147483648, 2147483648]"],
    );
}

#[test]
fn broadcast_to_too_many_elements() {
    let e = fails(|k| {
        let a = k.arange(0, 2048);
        let _ = a.expand_dims(1) + a.expand_dims(0);
    });
    assert_error(&e, "add", &["at most 1048576 elements", "[2048, 2048]"]);
}

/// A value made by another kernel's builder (captured by a nested `Kernel::build`) named an
/// entry of that builder's arenas: an index out of bounds, or silently another operand.
#[test]
fn value_of_another_kernel() {
    let mut errors = Vec::new();
    let outer = Kernel::build("outer", |k| {
        let offs = k.arange(0, 16);
        let total = offs.sum(0);
        let flag = total.gt(0);
        errors.push((
            "add",
            fails(|k2| {
                let y = k2.arg_ptr("y", F32);
                k2.store(y + offs, 1.0);
            }),
        ));
        errors.push((
            "store",
            fails(|k2| {
                let y = k2.arg_ptr("y", I32);
                k2.store(y + k2.arange(0, 16), offs);
            }),
        ));
        errors.push((
            "load",
            fails(|k2| {
                let y = k2.arg_ptr("y", F32);
                let mask = offs.lt(8);
                let _ = k2.load_masked(y + k2.arange(0, 16), mask, 0.0);
            }),
        ));
        errors.push((
            "where",
            fails(|k2| {
                let _ = k2.where_(flag, 1.0, 2.0);
            }),
        ));
        errors.push(("if", fails(|k2| k2.if_then(flag, || {}))));
        errors.push((
            "for",
            fails(|k2| {
                let _ = k2.for_range(0, 4, 1, &[total], |_, c| c.to_vec());
            }),
        ));
        errors.push(("for", fails(|k2| k2.for_each(0, total, 1, |_| {}))));
        errors.push((
            "while",
            fails(|k2| {
                let _ = k2.while_loop(&[k2.scalar(0, I32)], |_| flag, |c| c.to_vec());
            }),
        ));
        errors.push((
            "atomic_add",
            fails(|k2| {
                let y = k2.arg_ptr("y", I32);
                let _ = k2.atomic_add(y, total, None);
            }),
        ));
    });
    assert!(outer.is_ok(), "the outer kernel is not affected: {outer:?}");
    for (op, e) in &errors {
        assert_error(
            e,
            op,
            &["belongs to kernel `outer`", "cannot be used in another kernel"],
        );
    }
}

#[test]
fn permute_that_is_not_a_permutation() {
    let e = fails(|k| {
        let _ = k.zeros(&[4, 8], F32).permute(&[0, 0]);
    });
    assert_error(&e, "permute", &["not a permutation"]);
}

#[test]
fn program_id_axis_out_of_range() {
    let e = fails(|k| {
        let _ = k.program_id(3);
    });
    assert_error(&e, "program_id", &["0, 1 or 2", "3"]);
    // The axis is reported as given, not as it would fit in the IR's byte.
    let e = fails(|k| {
        let _ = k.num_programs(300);
    });
    assert_error(&e, "num_programs", &["0, 1 or 2", "got 300"]);
}

#[test]
fn literal_out_of_range() {
    let e = fails(|k| {
        let x = k.zeros(&[16], I8);
        let _ = x + 300;
    });
    assert_error(&e, "add", &["300", "i8"]);
}

#[test]
fn wide_literals_are_checked_as_written() {
    // 2^63 and usize::MAX are refused as written, not wrapped to negative numbers first.
    let e = fails(|k| {
        let x = k.zeros(&[16], I64);
        let _ = x + (1u64 << 63);
    });
    assert_error(&e, "add", &["9223372036854775808", "i64"]);
    let e = fails(|k| {
        let x = k.zeros(&[16], I32);
        let _ = x * usize::MAX;
    });
    assert_error(&e, "mul", &["18446744073709551615", "i32"]);
    // A u64 block takes them; a float block gets them with their sign.
    let k = Kernel::build("wide", |k| {
        let _ = k.zeros(&[16], U64) + u64::MAX;
        let _ = k.zeros(&[16], F32) + (1u64 << 63);
    })
    .unwrap();
    let text = k.to_string();
    assert!(!text.contains("-9.2"), "a float literal changed sign:\n{text}");
}

#[test]
fn bitcast_of_different_width() {
    let e = fails(|k| {
        let _ = k.zeros(&[16], F32).bitcast(I16);
    });
    assert_error(&e, "bitcast", &["same width"]);
}

#[test]
fn pointer_plus_float_offset() {
    let e = fails(|k| {
        let x = k.arg_ptr("x", F32);
        let _ = x + k.zeros(&[16], F32);
    });
    assert_error(&e, "addptr", &["offset must be an integer"]);
}

#[test]
fn duplicate_parameter_names() {
    let e = fails(|k| {
        k.arg_ptr("x", F32);
        k.arg_ptr("x", F32);
    });
    assert_error(&e, "arg", &["`x`", "already used"]);
}

#[test]
fn block_parameter() {
    let e = fails(|k| {
        k.arg(
            "x",
            Type::block(rutile_ir::Elem::Scalar(F32), rutile_ir::Shape::new(&[4]).unwrap()),
        );
    });
    assert_error(&e, "arg", &["scalars or pointers"]);
}

#[test]
fn atomic_on_i8() {
    let e = fails(|k| {
        let p = k.arg_ptr("p", I8);
        let _ = k.atomic_add(p, 1, None);
    });
    assert_error(&e, "atomic_add", &["32- or 64-bit"]);
}

#[test]
fn one_mistake_gives_one_message() {
    // Everything downstream of the bad arange fails silently.
    let e = fails(|k| {
        let x = k.arg_ptr("x", F32);
        let offs = k.arange(0, 100);
        let v = k.load(x + offs) * 2.0;
        k.store(x + offs, v.exp());
    });
    assert_eq!(e.diagnostics.len(), 1, "{e}");
    assert_eq!(e.first().op, "arange");
}

#[test]
fn several_independent_mistakes_are_all_reported() {
    let e = fails(|k| {
        k.arange(0, 3);
        k.program_id(7);
    });
    assert_eq!(e.diagnostics.len(), 2, "{e}");
}

#[test]
fn rendered_error_reads_well() {
    let e = fails(|k| {
        let a = k.arange(0, 64);
        let _ = a + k.arange(0, 32);
    });
    let text = e.to_string();
    assert!(text.starts_with("kernel `bad`: 1 error\n  `add` at "), "{text}");
    assert!(
        text.ends_with("shapes [64] and [32] cannot be broadcast together"),
        "{text}"
    );
}

/// A pipelined loop's depth outside 1 to `MAX_LOOP_STAGES` is refused, naming the loop;
/// inside, the printed kernel shows it.
#[test]
fn for_range_staged_depth_out_of_range() {
    for bad in [0, rutile_ir::ir::MAX_LOOP_STAGES + 1] {
        let e = fails(|k| {
            k.for_range_staged(0, 8, 1, bad, &[], |_, _| vec![]);
        });
        assert_error(&e, "for", &["num_stages must be 1 to 8", &format!("got {bad}")]);
    }
    let k = Kernel::build("staged", |k| {
        let x = k.arg_ptr("X", F32);
        k.for_range_staged(0, 8, 1, 3, &[], |i, _| {
            k.store(x + i, 1.0f32);
            vec![]
        });
    })
    .unwrap();
    assert!(k.to_string().contains("num_stages=3"), "{k}");
}
