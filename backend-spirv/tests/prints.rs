//! `device_print` on Vulkan: a kernel that prints gets a print buffer binding after its
//! pointer parameters (the launch uniform after it), one print site per lowered print with
//! its values' types, and a module that passes naga's validation and spirv-val, for values
//! of every width the records hold (booleans, 8- to 64-bit integers, f16, f32, f64), on
//! subgroup targets and without subgroups. (That the records print the interpreter's lines
//! is checked through the runtime on lavapipe: `examples/tests/debug_ops.rs`.)

mod common;

use rutile_ir::target::{Specialization, Target};
use rutile_ir::Kernel;
use rutile_ir::ScalarType::{self, *};
use rutile_spirv::SpirvTarget;

fn printing(types: &[ScalarType]) -> Kernel {
    Kernel::build("printing", |k| {
        let x = k.arg_ptr("x", F32);
        let n = k.arg_i32("n");
        let i = k.program_id(0) * 64 + k.arange(0, 64);
        let mask = i.lt(n);
        let v = k.load_masked(x + i, mask, 0.0f32);
        let values: Vec<_> = types.iter().map(|&t| v.to(t)).collect();
        k.device_print("v", &values);
        k.device_print("mask", &[mask]);
        k.device_print("block", &[]);
    })
    .unwrap()
}

#[test]
fn printing_kernels_bind_a_print_buffer_and_validate() {
    let types = [F32, I32, U32, F16, I8, U16, I64, U64, F64];
    let kernel = printing(&types);
    for (warp_size, shuffles) in [(32, true), (32, false)] {
        let target = Target {
            shuffles,
            ..Target::vulkan(warp_size, 2, 48 * 1024)
        };
        let t = rutile_ir::lower::lower(&kernel, &target, &Specialization::all(kernel.params.len())).unwrap();
        let mut st = SpirvTarget::full(warp_size);
        if !shuffles {
            st.subgroup_size = None;
        }
        let (sk, wgsl) = common::check(&t, &st);
        assert_eq!(sk.bindings.storage.len(), 1);
        assert_eq!(sk.bindings.print, Some(1), "the print buffer after the pointer");
        assert_eq!(sk.bindings.uniform_binding(), Some(2), "the launch uniform after it");
        assert!(wgsl.contains("rutile_print: array<atomic<u32>>"), "{wgsl}");
        // One site per lowered print: per element the thread holds, and the program's line.
        let v_sites: Vec<_> = sk.prints.iter().filter(|p| p.prefix == "v").collect();
        assert!(!v_sites.is_empty());
        for site in &v_sites {
            assert_eq!(site.values, types, "the values' types");
            assert_eq!(site.coords, 1);
            assert_eq!(
                site.record_words(),
                4 + 1 + 6 + 3 * 2,
                "words: index, pids, coordinate, values"
            );
        }
        assert!(sk.prints.iter().any(|p| p.prefix == "mask" && p.values == [Bool]));
        assert!(sk
            .prints
            .iter()
            .any(|p| p.prefix == "block" && p.values.is_empty() && p.coords == 0));
    }
}

/// An `f64` value needs 64-bit integers on the device too (its record splits its bits in
/// words): without them the translation says so. (64-bit integer values need them anyway.)
#[test]
fn printing_64_bit_values_needs_64_bit_integers() {
    let kernel = printing(&[F64]);
    let target = Target::vulkan(32, 2, 48 * 1024);
    let t = rutile_ir::lower::lower(&kernel, &target, &Specialization::all(kernel.params.len())).unwrap();
    let st = SpirvTarget {
        shader_i64: false,
        ..SpirvTarget::full(32)
    };
    let err = rutile_spirv::emit(&t, &st).unwrap_err().to_string();
    assert!(err.contains("device_print") && err.contains("64-bit integers"), "{err}");
}

/// A kernel that prints nothing has no print buffer.
#[test]
fn kernels_without_prints_have_no_print_buffer() {
    let k = common::vector_add(F32);
    let (sk, _) = common::check(&k, &common::basic());
    assert_eq!(sk.bindings.print, None);
    assert!(sk.prints.is_empty());
    assert_eq!(sk.bindings.uniform_binding(), Some(3));
}
