//! `byte_perm` (one op: `prmt` for PTX, shifts and masks for targets without one): against
//! CUDA's `__byte_perm` as its documentation defines it, on random words and selectors
//! (high nibbles and the fourth bit of each nibble set too) of both 32-bit types, and on
//! selectors known when the kernel is built, in the interpreter and lowered for both kinds
//! of target through the simulator, and its mistakes as errors that name it.

mod f32_functions;

use f32_functions::interpreted_and_lowered_agree;
use rutile_ir::interp::{self, ArgValue, HostBuffer};
use rutile_ir::testing::Rng;
use rutile_ir::ScalarType::{self, F32, I32, I64, U32};
use rutile_ir::{Kernel, KernelBuilder};

const BLOCK: i32 = 256;

/// `__byte_perm(x, y, s)`: byte `n` of the result is byte `(s >> 4n) & 7` of the eight of
/// `y:x`.
fn reference(x: u32, y: u32, s: u32) -> u32 {
    let bytes = ((y as u64) << 32) | x as u64;
    (0..4).fold(0, |r, n| {
        let pick = (s >> (4 * n)) & 7;
        r | ((((bytes >> (8 * pick)) & 0xFF) as u32) << (8 * n))
    })
}

/// What a test kernel fixes when it is built.
#[derive(Clone, Copy)]
enum Fixed {
    /// Nothing: `x`, `y` and the selector loaded.
    Nothing,
    /// The selector, a constant.
    Selector(u32),
    /// `x` and `y` (a table of eight bytes), and the selector's bits outside a mask.
    Table { x: u32, y: u32, mask: u32 },
}

/// `out = x.byte_perm(y, s)` with what `fixed` says known when the kernel is built, the
/// rest loaded.
fn kernel(t: ScalarType, fixed: Fixed) -> Kernel {
    Kernel::build("byte_perm", |k| {
        let (px, py, ps, out) = (
            k.arg_ptr("x", t),
            k.arg_ptr("y", t),
            k.arg_ptr("s", U32),
            k.arg_ptr("out", t),
        );
        let n = k.arg_i32("n");
        let offs = k.program_id(0) * BLOCK + k.arange(0, BLOCK);
        let mask = offs.lt(n);
        let (x, y) = match fixed {
            Fixed::Table { x, y, .. } => {
                let word = |w: u32| k.scalar(w as i64, U32).bitcast(t);
                (word(x), word(y))
            }
            _ => (k.load_masked(px + offs, mask, 0), k.load_masked(py + offs, mask, 0)),
        };
        let s = match fixed {
            Fixed::Selector(s) => k.scalar(s as i64, U32),
            Fixed::Table { mask: bits, .. } => k.load_masked(ps + offs, mask, 0) & bits as i64,
            Fixed::Nothing => k.load_masked(ps + offs, mask, 0),
        };
        k.store_masked(out + offs, x.byte_perm(y, s), mask);
    })
    .unwrap_or_else(|e| panic!("{e}"))
}

/// Random words and selectors, a ragged count, with the documented selectors first.
fn inputs(rng: &mut Rng) -> (Vec<u32>, Vec<u32>, Vec<u32>) {
    let n = 1000;
    let x: Vec<u32> = (0..n).map(|_| rng.next_u64() as u32).collect();
    let y: Vec<u32> = (0..n).map(|_| rng.next_u64() as u32).collect();
    let mut s: Vec<u32> = (0..n).map(|_| rng.next_u64() as u32).collect();
    s[..4].copy_from_slice(&[0x3210, 0x7654, 0x0123, 0x4444]);
    (x, y, s)
}

fn launch(t: ScalarType, x: &[u32], y: &[u32], s: &[u32]) -> (Vec<ArgValue>, Vec<HostBuffer>, [u32; 3]) {
    let ptr = |buffer| ArgValue::Ptr { buffer, offset: 0 };
    let args = vec![ptr(0), ptr(1), ptr(2), ptr(3), ArgValue::Int(x.len() as i64)];
    let words = |v: &[u32]| match t {
        I32 => HostBuffer::from_slice(&v.iter().map(|&w| w as i32).collect::<Vec<_>>()),
        _ => HostBuffer::from_slice(v),
    };
    let bufs = vec![
        words(x),
        words(y),
        HostBuffer::from_slice(s),
        HostBuffer::zeros(t, x.len()),
    ];
    (args, bufs, [(x.len() as u32).div_ceil(BLOCK as u32), 1, 1])
}

fn words(t: ScalarType, b: &HostBuffer) -> Vec<u32> {
    match t {
        I32 => b.to_vec::<i32>().unwrap().iter().map(|&w| w as u32).collect(),
        _ => b.to_vec::<u32>().unwrap(),
    }
}

#[test]
fn it_is_cuda_s_byte_perm_on_both_word_types() {
    let mut rng = Rng::new(71);
    for t in [U32, I32] {
        let (x, y, s) = inputs(&mut rng);
        let (args, mut bufs, grid) = launch(t, &x, &y, &s);
        interp::run(&kernel(t, Fixed::Nothing), grid, &args, &mut bufs).unwrap();
        let got = words(t, &bufs[3]);
        assert_eq!(&got[..4], &[x[0], y[1], x[2].swap_bytes(), (y[3] & 0xFF) * 0x0101_0101]);
        for i in 0..x.len() {
            let want = reference(x[i], y[i], s[i]);
            assert_eq!(got[i], want, "byte_perm({:#x}, {:#x}, {:#x}) on {t}", x[i], y[i], s[i]);
        }
    }
}

#[test]
fn the_lowering_computes_the_interpreter_s_words() {
    let mut rng = Rng::new(72);
    for t in [U32, I32] {
        let (x, y, s) = inputs(&mut rng);
        let (args, bufs, grid) = launch(t, &x, &y, &s);
        interpreted_and_lowered_agree(&t.to_string(), &kernel(t, Fixed::Nothing), grid, &args, &bufs, 3);
    }
}

#[test]
fn selectors_known_when_built_pick_the_same_bytes() {
    let mut rng = Rng::new(73);
    for (t, selector) in [
        (U32, 0x3210),
        (I32, 0x0123),
        (U32, 0x7654),
        (I32, 0xFA5C),
        (U32, 0x1234_8F70),
    ] {
        let (x, y, s) = inputs(&mut rng);
        let (args, bufs, grid) = launch(t, &x, &y, &s);
        let kernel = kernel(t, Fixed::Selector(selector));
        let want = interpreted_and_lowered_agree(&format!("{selector:#x} on {t}"), &kernel, grid, &args, &bufs, 3);
        let got = words(t, &want[3]);
        for i in 0..x.len() {
            assert_eq!(
                got[i],
                reference(x[i], y[i], selector),
                "byte_perm({:#x}, {:#x}, {selector:#x})",
                x[i],
                y[i]
            );
        }
    }
}

/// A lookup in a constant table of eight bytes (`x` and `y` constants), the selector's
/// nibbles masked so that some are known zero: the lowering without a byte permute folds
/// the bytes those pick, and computes the rest.
#[test]
fn lookups_in_constant_tables_pick_the_same_bytes() {
    let mut rng = Rng::new(74);
    let (table_x, table_y) = (0xC080_40F1u32, 0x8A3F_0001u32);
    for (t, mask) in [(U32, 0x77u32), (I32, 0x7070), (U32, 0x0F07), (I32, 0x7777)] {
        let (x, y, s) = inputs(&mut rng);
        let (args, bufs, grid) = launch(t, &x, &y, &s);
        let kernel = kernel(
            t,
            Fixed::Table {
                x: table_x,
                y: table_y,
                mask,
            },
        );
        let want = interpreted_and_lowered_agree(&format!("mask {mask:#x} on {t}"), &kernel, grid, &args, &bufs, 3);
        let got = words(t, &want[3]);
        for i in 0..x.len() {
            assert_eq!(
                got[i],
                reference(table_x, table_y, s[i] & mask),
                "selector {:#x}",
                s[i] & mask
            );
        }
    }
}

#[test]
fn mistakes_are_errors_that_name_it() {
    type Make = for<'b> fn(&'b KernelBuilder);
    let cases: [(Make, &str); 4] = [
        (
            |k| {
                let _ = k.zeros(&[16], F32).byte_perm(k.zeros(&[16], F32), k.zeros(&[16], U32));
            },
            "f32",
        ),
        (
            |k| {
                let _ = k.zeros(&[16], I32).byte_perm(k.zeros(&[16], U32), k.zeros(&[16], U32));
            },
            "u32",
        ),
        (
            |k| {
                let _ = k.zeros(&[16], U32).byte_perm(k.zeros(&[16], U32), k.zeros(&[16], I64));
            },
            "i64",
        ),
        (
            |k| {
                let _ = k.zeros(&[16], U32).byte_perm(k.zeros(&[8], U32), k.zeros(&[16], U32));
            },
            "broadcast",
        ),
    ];
    for (make, word) in cases {
        let e = Kernel::build("bad", make).unwrap_err().to_string();
        assert!(e.contains("byte_perm") && e.contains(word), "{e}");
    }
}
