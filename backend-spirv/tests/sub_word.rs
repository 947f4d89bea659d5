//! Types narrower than a word, run on a Vulkan device (lavapipe in CI): `bf16` rounded
//! once from every source type and in `fma`, against the correctly rounded values computed
//! here in integers; and buffers of `bf16` and 8- and 16-bit integers loaded and stored at
//! every vector width, neighbouring threads writing the halves and quarters of one word.

mod common;

use common::global_index;
use common::vk::{bytes, device_or_skip, from_bytes, Vk};
use rutile_ir::ir::{BinaryOp, CmpOp};
use rutile_ir::thread::{Expr, Memory, Special, ThreadKernel, ThreadKernelBuilder};
use rutile_ir::ScalarType::{self, *};
use rutile_spirv::{emit, ScalarArg};

const THREADS: u32 = 64;

/// A small xorshift generator: the tests' inputs, reproducible.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 << 13;
        self.0 ^= self.0 >> 7;
        self.0 ^= self.0 << 17;
        self.0
    }
}

/// The bits of the `bf16` nearest `±mag · 2^exp` (ties to even), by integer arithmetic.
fn bf16_of(negative: bool, mag: u128, exp: i32) -> u16 {
    let sign = (negative as u16) << 15;
    if mag == 0 {
        return sign;
    }
    let top = 127 - mag.leading_zeros() as i32 + exp;
    // The unit of the last place: 8 significant bits, or bf16's smallest subnormal.
    let unit = (top - 7).max(-133);
    let drop = unit - exp;
    let mut q = if drop <= 0 {
        mag << (-drop)
    } else if drop >= 128 {
        0
    } else {
        let q = mag >> drop;
        let rem = mag & ((1u128 << drop) - 1);
        let half = 1u128 << (drop - 1);
        if rem > half || (rem == half && q & 1 == 1) {
            q + 1
        } else {
            q
        }
    };
    let mut unit = unit;
    if q >= 256 {
        q >>= 1;
        unit += 1;
    }
    if q == 0 {
        return sign;
    }
    if q < 128 {
        return sign | q as u16;
    }
    let e = unit + 7 + 127;
    if e >= 255 {
        return sign | 0x7f80;
    }
    sign | (e as u16) << 7 | (q as u16 - 128)
}

/// `(negative, significand, exponent)` of a finite float with `mant` fraction bits and
/// exponent `bias`, from its bits; `None` for infinities and NaNs.
fn decompose(bits: u64, mant: u32, exp_bits: u32) -> Option<(bool, u128, i32)> {
    let bias = (1i32 << (exp_bits - 1)) - 1;
    let e = ((bits >> mant) & ((1 << exp_bits) - 1)) as i32;
    if e == (1 << exp_bits) - 1 {
        return None;
    }
    let f = (bits & ((1 << mant) - 1)) as u128;
    let negative = bits >> (mant + exp_bits) & 1 == 1;
    Some(match e {
        0 => (negative, f, 1 - bias - mant as i32),
        _ => (negative, f | 1 << mant, e - bias - mant as i32),
    })
}

/// Whether bf16 bits are a NaN.
fn is_nan(b: u16) -> bool {
    b & 0x7fff > 0x7f80
}

/// Runs `out[i] = cast<bf16>(a[i])` for `a` of `src`, one element a thread: the stores are
/// of half a word each, two neighbouring threads to a word.
fn cast_to_bf16(vk: &Vk, src: ScalarType, a: &[u8], n: usize) -> Vec<u16> {
    let mut kb = ThreadKernelBuilder::new(format!("to_bf16_{src}"), THREADS / 32, 32);
    let a_buf = kb.ptr("a", src);
    let o_buf = kb.ptr("out", BF16);
    let i = global_index(&mut kb, THREADS);
    let x = kb.load(src, 1, Memory::Global { param: a_buf }, i, None)[0];
    let y = kb.set(BF16, Expr::Cast(x));
    kb.store(vec![y], Memory::Global { param: o_buf }, i, None);
    let sk = emit(&kb.finish(), &vk.target).unwrap_or_else(|e| panic!("{e}"));
    let mut bufs = vec![a.to_vec(), vec![0u8; 2 * n]];
    vk.run(&sk, &mut bufs, &[], [(n as u32).div_ceil(THREADS), 1, 1]);
    from_bytes(&bufs[1])
}

fn check_bf16(what: &str, i: usize, input: String, got: u16, want: Option<u16>) {
    match want {
        None => assert!(is_nan(got), "{what} element {i}: {input} gave {got:#06x}, not a NaN"),
        Some(w) => assert_eq!(got, w, "{what} element {i}: {input} gave {got:#06x}, want {w:#06x}"),
    }
}

/// Values of `bits` bits next to the rounding points of bf16: ties, one below and above,
/// in every binade a float of that width has, and random ones.
fn float_bits(rng: &mut Rng, mant: u32, exp_bits: u32, count: usize) -> Vec<u64> {
    let width = 1 + mant + exp_bits;
    let mut v: Vec<u64> = vec![0, 1 << (width - 1), ((1 << exp_bits) - 1) << mant];
    v.push(v[2] | 1); // a NaN
    v.push(v[2] | 1 << (width - 1)); // -inf
    while v.len() < count {
        let r = rng.next();
        let bits = match v.len() % 4 {
            // A tie or its neighbours at bf16's precision: the bits below the eighth
            // significant one are 1000...0, plus or minus one.
            0..=2 if mant > 7 => {
                let e = r >> 32 & ((1 << exp_bits) - 1);
                let keep = (r >> 8) & ((1 << 7) - 1);
                let tie = 1u64 << (mant - 8);
                let below = (tie + (v.len() as u64 % 3)).wrapping_sub(1);
                (r >> 63) << (width - 1) | e << mant | keep << (mant - 7) | below & ((1 << (mant - 7)) - 1)
            }
            _ => r & ((1u128 << width) - 1) as u64,
        };
        v.push(bits);
    }
    v
}

#[test]
fn bf16_from_every_type_rounds_once() {
    let Some(vk) = device_or_skip("bf16_from_every_type_rounds_once") else {
        return;
    };
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let n = 4001;
    // Floats: f32, f64 (ties of bf16 and their neighbours, specials, random bits), f16.
    for (src, mant, exp_bits) in [(F32, 23, 8), (F64, 52, 11), (F16, 10, 5)] {
        let bits = float_bits(&mut rng, mant, exp_bits, n);
        let a: Vec<u8> = match src {
            F32 => bytes(&bits.iter().map(|&b| b as u32).collect::<Vec<_>>()),
            F64 => bytes(&bits),
            _ => bytes(&bits.iter().map(|&b| b as u16).collect::<Vec<_>>()),
        };
        let got = cast_to_bf16(&vk, src, &a, n);
        for (i, &b) in bits.iter().enumerate() {
            let want = match decompose(b, mant, exp_bits) {
                Some((neg, m, e)) => Some(bf16_of(neg, m, e)),
                None if b & ((1 << mant) - 1) == 0 => Some(if b >> (mant + exp_bits) & 1 == 1 {
                    0xff80
                } else {
                    0x7f80
                }),
                None => None,
            };
            check_bf16(&format!("{src} to bf16"), i, format!("{b:#x}"), got[i], want);
        }
    }
    // Integers: random of every magnitude, ties of bf16 and their neighbours, the extremes.
    for src in [I32, U32, I64, U64, I8, U8, I16, U16] {
        let bits = src.bits();
        let mut v: Vec<u64> = vec![0, 1, u64::MAX, 1 << (bits - 1), (1 << (bits - 1)) - 1];
        while v.len() < n {
            let r = rng.next();
            let len = 1 + (r % bits as u64) as u32;
            let mut x = rng.next() & (u64::MAX >> (64 - len));
            if len > 9 && v.len().is_multiple_of(2) {
                // A tie below the eighth significant bit, or a neighbour of one.
                let tail = len - 8;
                x = (x >> tail << tail) | 1 << (tail - 1);
                x = x.wrapping_add(v.len() as u64 % 3).wrapping_sub(1);
            }
            v.push(x);
        }
        let mask = if bits == 64 { u64::MAX } else { (1 << bits) - 1 };
        let a: Vec<u8> = v
            .iter()
            .flat_map(|&x| (x & mask).to_le_bytes()[..bits as usize / 8].to_vec())
            .collect();
        let got = cast_to_bf16(&vk, src, &a, n);
        for (i, &x) in v.iter().enumerate() {
            let x = x & mask;
            let value: i128 = if src.is_signed_int() && x >> (bits - 1) & 1 == 1 {
                x as i128 - (1i128 << bits)
            } else {
                x as i128
            };
            let want = bf16_of(value < 0, value.unsigned_abs(), 0);
            check_bf16(&format!("{src} to bf16"), i, format!("{value}"), got[i], Some(want));
        }
    }
}

#[test]
fn bf16_fma_rounds_once() {
    let Some(vk) = device_or_skip("bf16_fma_rounds_once") else {
        return;
    };
    let mut kb = ThreadKernelBuilder::new("bf16_fma", THREADS / 32, 32);
    let bufs: Vec<u32> = ["a", "b", "c"].iter().map(|n| kb.ptr(n, BF16)).collect();
    let o_buf = kb.ptr("out", BF16);
    let i = global_index(&mut kb, THREADS);
    let x: Vec<_> = bufs
        .iter()
        .map(|&p| kb.load(BF16, 1, Memory::Global { param: p }, i, None)[0])
        .collect();
    let r = kb.set(BF16, Expr::Fma(x[0], x[1], x[2]));
    kb.store(vec![r], Memory::Global { param: o_buf }, i, None);
    let sk = emit(&kb.finish(), &vk.target).unwrap_or_else(|e| panic!("{e}"));
    // Exponents within ±24, so that products stay normal and the exact sums fit in i128;
    // every fourth addend is made to put the product's sum on or next to a tie.
    let mut rng = Rng(0x2545_f491_4f6c_dd1d);
    let n = 6007;
    let value = |r: u64| -> u16 { (((r >> 15) & 1) << 15 | (127 - 24 + (r % 49)) << 7 | (r >> 20) & 0x7f) as u16 };
    let (mut a, mut b, mut c) = (vec![], vec![], vec![]);
    for j in 0..n {
        let (x, y) = (value(rng.next()), value(rng.next()));
        let mut z = value(rng.next());
        if j % 4 == 0 {
            // z = -(the product's top bits), so that the sum is the product's tail.
            let p = half::bf16::from_bits(x).to_f64() * half::bf16::from_bits(y).to_f64();
            z = half::bf16::from_f64(-p).to_bits();
        }
        a.push(x);
        b.push(y);
        c.push(z);
    }
    let mut io = vec![bytes(&a), bytes(&b), bytes(&c), vec![0u8; 2 * n]];
    vk.run(&sk, &mut io, &[], [(n as u32).div_ceil(THREADS), 1, 1]);
    let got: Vec<u16> = from_bytes(&io[3]);
    let parts = |b: u16| decompose(b as u64, 7, 8).expect("finite");
    for j in 0..n {
        let ((na, ma, ea), (nb, mb, eb), (nc, mc, ec)) = (parts(a[j]), parts(b[j]), parts(c[j]));
        let p = (ma * mb) as i128 * if na != nb { -1 } else { 1 };
        let (ep, z) = (ea + eb, mc as i128 * if nc { -1 } else { 1 });
        let low = ep.min(ec);
        let sum = (p << (ep - low)) + (z << (ec - low));
        // An exact zero sum is +0 (round to nearest), unless both terms are -0.
        let want = bf16_of(sum < 0, sum.unsigned_abs(), low);
        let input = format!("fma({:#06x}, {:#06x}, {:#06x})", a[j], b[j], c[j]);
        check_bf16("bf16 fma", j, input, got[j], Some(want));
    }
}

/// `out[e] = in[e] + 1` for the elements of the threads whose index is not 1 modulo 3,
/// `w` consecutive elements a thread, as one vector load and one vector store: the other
/// threads' elements keep what `out` held. Warps of `warp` lanes.
fn plus_one(t: ScalarType, w: usize, warp: u32) -> ThreadKernel {
    let mut kb = ThreadKernelBuilder::new(format!("plus_one_{t}_{w}"), THREADS / warp, warp);
    let a_buf = kb.ptr("a", t);
    let o_buf = kb.ptr("out", t);
    let i = global_index(&mut kb, THREADS);
    let three = kb.int(I32, 3);
    let r = kb.bin(BinaryOp::Rem, i, three);
    let one_i = kb.int(I32, 1);
    let skip = kb.cmp(CmpOp::Ne, r, one_i);
    let width = kb.int(I32, w as i64);
    let at = kb.bin(BinaryOp::Mul, i, width);
    let xs = kb.load(t, w, Memory::Global { param: a_buf }, at, None);
    let one = if t == BF16 { kb.float(t, 1.0) } else { kb.int(t, 1) };
    let ys: Vec<_> = xs.into_iter().map(|x| kb.bin(BinaryOp::Add, x, one)).collect();
    kb.store(ys, Memory::Global { param: o_buf }, at, Some(skip));
    kb.finish()
}

/// Every vector width, with warps of the device's subgroup size (stores of part of a word
/// gather the word from the neighbouring lanes: one store a word, or the two atomics on
/// the parts the group has where some thread is masked off) and of another size (each
/// lane's two atomics).
#[test]
fn narrow_buffers_at_every_vector_width() {
    let Some(vk) = device_or_skip("narrow_buffers_at_every_vector_width") else {
        return;
    };
    let mut rng = Rng(0x5851_f42d_4c95_7f2d);
    let threads = 3 * THREADS as usize;
    let subgroup = vk
        .target
        .subgroup_size
        .expect("the harness's device has a subgroup size");
    let other = if subgroup == 32 { 16 } else { 32 };
    for (t, warp) in [I8, U8, I16, U16, BF16]
        .into_iter()
        .flat_map(|t| [(t, subgroup), (t, other)])
    {
        let size = t.size_bytes();
        for w in [1usize, 2, 4, 8] {
            let n = threads * w;
            let input: Vec<u8> = (0..n * size).map(|_| rng.next() as u8).collect();
            let input: Vec<u8> = if t == BF16 {
                // Finite values, so that `+ 1` is a number to compare.
                input
                    .chunks(2)
                    .flat_map(|c| (u16::from_le_bytes([c[0], c[1]]) & 0xbfff).to_le_bytes())
                    .collect()
            } else {
                input
            };
            let sentinel: Vec<u8> = (0..n * size).map(|j| (j * 7 + 3) as u8).collect();
            let sk = emit(&plus_one(t, w, warp), &vk.target).unwrap_or_else(|e| panic!("{e}"));
            let partial = w * size < 4;
            let gathers = sk.wgsl().unwrap().contains("subgroupShuffleXor(");
            assert_eq!(gathers, partial && warp == subgroup, "{t} x{w}, warps of {warp}");
            let mut io = vec![input.clone(), sentinel.clone()];
            vk.run(&sk, &mut io, &[], [(threads as u32).div_ceil(THREADS), 1, 1]);
            for e in 0..n {
                let (x, got) = (&input[e * size..][..size], &io[1][e * size..][..size]);
                let want: Vec<u8> = if (e / w) % 3 == 1 {
                    sentinel[e * size..][..size].to_vec()
                } else {
                    match t {
                        I8 | U8 => vec![x[0].wrapping_add(1)],
                        I16 | U16 => u16::from_le_bytes([x[0], x[1]]).wrapping_add(1).to_le_bytes().to_vec(),
                        _ => {
                            let v = half::bf16::from_le_bytes([x[0], x[1]]).to_f64() + 1.0;
                            let (neg, m, ex) = decompose(v.to_bits(), 52, 11).expect("finite");
                            bf16_of(neg, m, ex).to_le_bytes().to_vec()
                        }
                    }
                };
                assert_eq!(got, &want[..], "{t} x{w}, warps of {warp}: element {e} (input {x:?})");
            }
        }
    }
}

/// Scalar parameters of the narrow types arrive widened: `out[0..5] = (i8, i16, u8, u16,
/// bf16)` parameters, each stored into a buffer of its type.
#[test]
fn narrow_scalar_parameters() {
    let Some(vk) = device_or_skip("narrow_scalar_parameters") else {
        return;
    };
    let types = [I8, I16, U8, U16, BF16];
    let mut kb = ThreadKernelBuilder::new("narrow_params", 1, 32);
    let outs: Vec<u32> = types.iter().map(|&t| kb.ptr(&format!("out_{t}"), t)).collect();
    let params: Vec<u32> = types.iter().map(|&t| kb.scalar(&format!("p_{t}"), t)).collect();
    let tid = kb.special(Special::ThreadId);
    for ((&t, &o), &p) in types.iter().zip(&outs).zip(&params) {
        let v = kb.param(p, t);
        kb.store(vec![v], Memory::Global { param: o }, tid, None);
    }
    let sk = emit(&kb.finish(), &vk.target).unwrap_or_else(|e| panic!("{e}"));
    let mut io = vec![
        vec![0u8; 32],
        vec![0u8; 64],
        vec![0u8; 32],
        vec![0u8; 64],
        vec![0u8; 64],
    ];
    let b = half::bf16::from_f32(-3.25);
    let args = [
        ScalarArg::I8(-5),
        ScalarArg::I16(-30000),
        ScalarArg::U8(250),
        ScalarArg::U16(65000),
        ScalarArg::BF16(b),
    ];
    vk.run(&sk, &mut io, &args, [1, 1, 1]);
    assert!(io[0].iter().all(|&x| x as i8 == -5));
    assert!(from_bytes::<i16>(&io[1]).iter().all(|&x| x == -30000));
    assert!(io[2].iter().all(|&x| x == 250));
    assert!(from_bytes::<u16>(&io[3]).iter().all(|&x| x == 65000));
    assert!(from_bytes::<u16>(&io[4]).iter().all(|&x| x == b.to_bits()));
}

/// Float literals round once to their type: a value just above the tie between two `bf16`
/// (and two `f16`), its excess below the f64 bits that `half`'s own conversion keeps, is
/// stored as the upper one.
#[test]
fn literals_round_once() {
    let Some(vk) = device_or_skip("literals_round_once") else {
        return;
    };
    let mut kb = ThreadKernelBuilder::new("literals", 1, 32);
    let (b_buf, h_buf) = (kb.ptr("b", BF16), kb.ptr("h", F16));
    let tid = kb.special(Special::ThreadId);
    let b = kb.float(BF16, 1.0 + 2f64.powi(-8) + 2f64.powi(-40));
    let h = kb.float(F16, 1.0 + 2f64.powi(-11) + 2f64.powi(-40));
    kb.store(vec![b], Memory::Global { param: b_buf }, tid, None);
    kb.store(vec![h], Memory::Global { param: h_buf }, tid, None);
    let sk = emit(&kb.finish(), &vk.target).unwrap_or_else(|e| panic!("{e}"));
    let mut io = vec![vec![0u8; 64], vec![0u8; 64]];
    vk.run(&sk, &mut io, &[], [1, 1, 1]);
    assert!(
        from_bytes::<u16>(&io[0]).iter().all(|&x| x == 0x3f81),
        "{:x?}",
        &io[0][..4]
    );
    assert!(
        from_bytes::<u16>(&io[1]).iter().all(|&x| x == 0x3c01),
        "{:x?}",
        &io[1][..4]
    );
}
