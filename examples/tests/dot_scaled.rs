//! `dot_scaled` (Triton's `tl.dot_scaled`: blocks in the OCP microscaling formats with
//! E8M0 scales along K) on every device (the interpreter and each GPU present: lavapipe in
//! CI), against a host reference computed from the formats' definitions: each element
//! decoded exactly (fp4 nibbles by their sign, exponent and mantissa bits, fp8 by
//! `rutile::F8E4M3` / `F8E5M2`), times `2^(s - 127)` (NaN for `s = 255`), rounded once to
//! bf16 (f16 where an operand is f16), the products summed in f64. Ragged M and N (masked
//! loads and stores), every pair of formats the kernels meet in practice, fp8 given as
//! its type or as bytes, scales on one side, both or none, NaN scales, fp4 packed along M
//! or N (Triton's `k_pack=False`), `fast_math`, and the smallest scales (2^-127, a
//! subnormal factor, and products below bf16's normal range).

use half::{bf16, f16};
use rutile::{
    Backend, Buffer, CpuDevice, Device, DeviceBuffer, DeviceExt, DotScaledOptions, Kernel, LaunchConfig, Microscaled,
    MxFormat, ScalarType,
};
use rutile_examples::rng::Rng;
use std::sync::Arc;

/// The block of the result a launch computes (one program) and K: 64 x 64 x 128 where a
/// program has 96 KiB of shared memory or more, else (lavapipe's 32 KiB, NVIDIA's Vulkan
/// driver's 48 KiB; bf16 held in words through Vulkan) 32 x 32 x 64.
#[derive(Clone, Copy)]
struct Size {
    bm: u32,
    bn: u32,
    k: u32,
}

fn size_for(d: &dyn Device) -> Size {
    match d.properties().shared_memory_per_block {
        Some(bytes) if bytes < 96 * 1024 => Size { bm: 32, bn: 32, k: 64 },
        _ => Size { bm: 64, bn: 64, k: 128 },
    }
}

/// One operand: its format, the element type it is stored as, whether it has scales, and
/// (fp4) whether its two values a byte lie along K.
#[derive(Clone, Copy, Debug)]
struct Side {
    format: MxFormat,
    stored: ScalarType,
    scaled: bool,
    k_pack: bool,
}

fn side(format: MxFormat, stored: ScalarType, scaled: bool) -> Side {
    Side {
        format,
        stored,
        scaled,
        k_pack: true,
    }
}

/// fp4 packed along M (left) or N (right).
fn outer(s: Side) -> Side {
    Side { k_pack: false, ..s }
}

/// Values a stored element holds (along K, along M or N).
fn packing(s: Side) -> (u32, u32) {
    match (s.format == MxFormat::E2M1, s.k_pack) {
        (false, _) => (1, 1),
        (true, true) => (2, 1),
        (true, false) => (1, 2),
    }
}

/// Stored elements along K.
fn stored_k(s: Side, k: u32) -> u32 {
    k / packing(s).0
}

/// `c[m, n] = dot_scaled(a, sa, b, sb)` for `m < M`, `n < N`: A `[M, K]` row-major (K / 2
/// bytes a row for fp4, or M / 2 rows packed along M), B `[K, N]` row-major (K / 2 rows for
/// fp4, or N / 2 columns packed along N), scales `[M, K / 32]` and `[N, K / 32]` row-major,
/// C `[M, N]` row-major. M and N are even.
fn kernel(lhs: Side, rhs: Side, fast_math: bool, Size { bm, bn, k: kk }: Size) -> Kernel {
    let groups = (kk / 32) as i32;
    Kernel::build("dot_scaled", |k| {
        let (pa, pb) = (k.arg_ptr("a", lhs.stored), k.arg_ptr("b", rhs.stored));
        let (psa, psb) = (k.arg_ptr("sa", ScalarType::U8), k.arg_ptr("sb", ScalarType::U8));
        let pc = k.arg_ptr("c", ScalarType::F32);
        let (m, n) = (k.arg_i32("M"), k.arg_i32("N"));
        let (rm, rn) = (k.arange(0, bm as i32), k.arange(0, bn as i32));
        let (kl, kr) = (stored_k(lhs, kk) as i32, stored_k(rhs, kk) as i32);
        let row_ok = rm.expand_dims(1).lt(m);
        let col_ok = rn.expand_dims(0).lt(n);
        // The stored rows of A and columns of B, each holding `pm` / `pn` of the result's.
        let (pm, pn) = (packing(lhs).1 as i32, packing(rhs).1 as i32);
        let am = k.arange(0, bm as i32 / pm).expand_dims(1);
        let a = k.load_masked(
            pa + (am * kl + k.arange(0, kl).expand_dims(0)),
            (am * pm).lt(m),
            k.scalar(0, lhs.stored),
        );
        let bcols = k.arange(0, bn as i32 / pn).expand_dims(0);
        let b = k.load_masked(
            pb + (k.arange(0, kr).expand_dims(1) * (n / pn) + bcols),
            (bcols * pn).lt(n),
            k.scalar(0, rhs.stored),
        );
        let g = k.arange(0, groups).expand_dims(0);
        let sa = k.load_masked(
            psa + (rm.expand_dims(1) * groups + g),
            row_ok,
            k.scalar(127, ScalarType::U8),
        );
        let sb = k.load_masked(
            psb + (rn.expand_dims(1) * groups + g),
            rn.expand_dims(1).lt(n),
            k.scalar(127, ScalarType::U8),
        );
        let operand = |v, scale, s: Side| {
            let o = Microscaled::new(v, scale, s.format);
            if s.k_pack {
                o
            } else {
                o.packed_along_m_or_n()
            }
        };
        let c = k.dot_scaled_with(
            operand(a, lhs.scaled.then_some(sa), lhs),
            operand(b, rhs.scaled.then_some(sb), rhs),
            None,
            DotScaledOptions { fast_math },
        );
        k.store_masked(pc + (rm.expand_dims(1) * n + rn.expand_dims(0)), c, row_ok & col_ok);
    })
    .unwrap_or_else(|e| panic!("{lhs:?} x {rhs:?}: {e}"))
}

/// An fp4 E2M1 nibble's value.
fn fp4(nibble: u8) -> f64 {
    let (e, m) = ((nibble >> 1) & 3, nibble & 1);
    let magnitude = if e == 0 {
        0.5 * m as f64
    } else {
        2f64.powi(e as i32 - 1) * (1.0 + 0.5 * m as f64)
    };
    if nibble & 8 != 0 {
        -magnitude
    } else {
        magnitude
    }
}

/// Random stored bytes of an operand of `count` stored elements and their values along K
/// (fp4 bytes give two each, the low nibble first); finite values only.
fn operand_bytes(rng: &mut Rng, s: Side, count: usize) -> (Vec<u8>, Vec<f64>) {
    let mut bytes = Vec::with_capacity(count * 2);
    let mut values = Vec::new();
    let per_element = if s.format == MxFormat::E2M1 { 2 } else { 1 };
    while values.len() < count * per_element {
        match s.format {
            MxFormat::E2M1 => {
                let b = (rng.next_u64() & 0xff) as u8;
                bytes.push(b);
                values.extend([fp4(b & 15), fp4(b >> 4)]);
            }
            MxFormat::E4M3 | MxFormat::E5M2 => {
                let b = (rng.next_u64() & 0xff) as u8;
                let v = if s.format == MxFormat::E4M3 {
                    rutile::F8E4M3::from_bits(b).to_f64()
                } else {
                    rutile::F8E5M2::from_bits(b).to_f64()
                };
                if v.is_finite() {
                    bytes.push(b);
                    values.push(v);
                }
            }
            MxFormat::Bf16 => {
                let v = bf16::from_f64(rng.unit() * 4.0 - 2.0);
                bytes.extend(v.to_bits().to_le_bytes());
                values.push(v.to_f64());
            }
            MxFormat::Fp16 => {
                let v = f16::from_f64(rng.unit() * 4.0 - 2.0);
                bytes.extend(v.to_bits().to_le_bytes());
                values.push(v.to_f64());
            }
        }
    }
    (bytes, values)
}

/// `v` rounded once to the products' type.
fn rounded(v: f64, compute_f16: bool) -> f64 {
    if compute_f16 {
        f16::from_f64(v).to_f64()
    } else {
        bf16::from_f64(v).to_f64()
    }
}

/// The E8M0 scale `s`'s value.
fn scale_value(s: u8) -> f64 {
    match s {
        255 => f64::NAN,
        s => 2f64.powi(s as i32 - 127),
    }
}

fn devices() -> Vec<Arc<dyn Device>> {
    let (_turn, gpus) = rutile_examples::gpus::gpus_under_test();
    std::iter::once(Arc::new(CpuDevice::new()) as Arc<dyn Device>)
        .chain(gpus)
        .collect()
}

/// A device buffer of an operand, of its stored type.
enum Stored {
    U8(Buffer<u8>),
    I8(Buffer<i8>),
    E4M3(Buffer<rutile::F8E4M3>),
    E5M2(Buffer<rutile::F8E5M2>),
    Bf16(Buffer<bf16>),
    F16(Buffer<f16>),
}

impl Stored {
    /// `bytes` (little-endian for 16-bit types) on `d` as `stored` values.
    fn upload(d: &dyn Device, stored: ScalarType, bytes: &[u8]) -> Stored {
        let halves = || bytes.chunks(2).map(|h| u16::from_le_bytes([h[0], h[1]]));
        match stored {
            ScalarType::F8E4M3 => Stored::E4M3(
                d.upload(&bytes.iter().map(|&b| rutile::F8E4M3::from_bits(b)).collect::<Vec<_>>())
                    .unwrap(),
            ),
            ScalarType::F8E5M2 => Stored::E5M2(
                d.upload(&bytes.iter().map(|&b| rutile::F8E5M2::from_bits(b)).collect::<Vec<_>>())
                    .unwrap(),
            ),
            ScalarType::BF16 => Stored::Bf16(d.upload(&halves().map(bf16::from_bits).collect::<Vec<_>>()).unwrap()),
            ScalarType::F16 => Stored::F16(d.upload(&halves().map(f16::from_bits).collect::<Vec<_>>()).unwrap()),
            ScalarType::I8 => Stored::I8(d.upload(&bytes.iter().map(|&b| b as i8).collect::<Vec<_>>()).unwrap()),
            _ => Stored::U8(d.upload(bytes).unwrap()),
        }
    }

    fn raw(&self) -> &DeviceBuffer {
        match self {
            Stored::U8(b) => b.raw(),
            Stored::I8(b) => b.raw(),
            Stored::E4M3(b) => b.raw(),
            Stored::E5M2(b) => b.raw(),
            Stored::Bf16(b) => b.raw(),
            Stored::F16(b) => b.raw(),
        }
    }
}

#[test]
fn dot_scaled_matches_the_formats_definitions_on_every_device() {
    use MxFormat::*;
    use ScalarType::{BF16, F16, F8E4M3, I8, U8};
    // (lhs, rhs, a NaN among the left scales, fast_math, the smallest scales on the first
    // rows)
    let cases = [
        (side(E2M1, U8, true), side(E2M1, U8, true), false, false, false),
        (side(E2M1, U8, true), side(E2M1, U8, true), false, false, true),
        (side(E2M1, I8, true), side(E4M3, F8E4M3, true), false, false, false),
        (side(E4M3, U8, true), side(E5M2, U8, false), true, false, false),
        (side(Bf16, BF16, false), side(E2M1, U8, true), false, false, false),
        (side(Fp16, F16, true), side(E4M3, U8, true), false, false, false),
        (side(E5M2, I8, false), side(E5M2, U8, false), false, false, false),
        // fp4 packed along M, along N, both (with fast_math: no scale is 255).
        (outer(side(E2M1, U8, true)), side(E4M3, U8, true), true, false, false),
        (
            side(Bf16, BF16, false),
            outer(side(E2M1, I8, true)),
            false,
            false,
            false,
        ),
        (
            outer(side(E2M1, U8, true)),
            outer(side(E2M1, U8, true)),
            false,
            true,
            false,
        ),
    ];
    for d in devices() {
        let d = d.as_ref();
        let size = size_for(d);
        // Ragged against the block: rows and columns past M and N are masked.
        let (m, n, k) = (size.bm as usize - 14, size.bn as usize - 24, size.k as usize);
        let mut rng = Rng::new(45);
        for (lhs, rhs, nan, fast_math, tiny) in cases {
            let at = format!(
                "{} x {} (packed along K: {}, {}; fast_math {fast_math}; tiny scales {tiny}), {m} x {n} x {k}",
                lhs.format.name(),
                rhs.format.name(),
                lhs.k_pack,
                rhs.k_pack
            );
            let compute_f16 = lhs.format == Fp16 || rhs.format == Fp16;
            let (pm, pn) = (packing(lhs).1 as usize, packing(rhs).1 as usize);
            let (a_bytes, a_vals) = operand_bytes(&mut rng, lhs, m / pm * stored_k(lhs, size.k) as usize);
            let (b_bytes, b_vals) = operand_bytes(&mut rng, rhs, stored_k(rhs, size.k) as usize * n / pn);
            // Scales around 1 (f16's range holds every product); one 255 on row 7 where asked.
            let spread = if compute_f16 { 6 } else { 10 };
            let mut scales = |count: usize| -> Vec<u8> {
                (0..count)
                    .map(|_| (127 - spread + (rng.next_u64() % (2 * spread as u64 + 1)) as i64) as u8)
                    .collect()
            };
            let (mut sa, mut sb) = (scales(m * k / 32), scales(n * k / 32));
            if nan {
                sa[7 * k / 32 + 1] = 255;
            }
            // The smallest scales: the first 8 rows scaled by 2^-127 to 2^-124 (0 stands
            // for 2^-127, a subnormal, as are many of its products with the values), B's
            // scales large enough that the rows' sums are normal in f32.
            if tiny {
                sa[..8 * k / 32]
                    .iter_mut()
                    .for_each(|s| *s = (rng.next_u64() % 4) as u8);
                sb.iter_mut().for_each(|s| *s = 140 + (rng.next_u64() % 11) as u8);
            }
            // A's values by row (k along the row), B's by row of K (n along the row): fp4's
            // bytes give A's in K order, or (packed along M) a byte of row `r` holds rows 2r
            // and 2r + 1; for B a byte of row `r` holds rows 2r and 2r + 1 of its column, or
            // (packed along N) B's in N order.
            let a_at = |i: usize, p: usize| -> f64 {
                match packing(lhs) {
                    (1, 2) => a_vals[((i / 2) * k + p) * 2 + i % 2],
                    _ => a_vals[i * k + p],
                }
            };
            let b_at = |p: usize, j: usize| -> f64 {
                match packing(rhs) {
                    (2, 1) => b_vals[((p / 2) * n + j) * 2 + p % 2],
                    _ => b_vals[p * n + j],
                }
            };
            let scaled = |v: f64, s: Option<u8>| rounded(v * s.map_or(1.0, scale_value), compute_f16);
            // The same with f32 subnormals flushed to zero (the factor 2^-127 and every
            // scaled value below 2^-126), which Vulkan allows a driver (NVIDIA's does):
            // through Vulkan, the smallest scales' case may match this reference instead.
            let flushed = |v: f64, s: Option<u8>| match s {
                Some(0) => 0.0,
                _ => Some(scaled(v, s)).filter(|x| x.abs() >= 2f64.powi(-126)).unwrap_or(0.0),
            };
            let (mut want, mut want_flushed) = (vec![0.0f64; m * n], vec![0.0f64; m * n]);
            let mut magnitude = vec![0.0f64; m * n];
            for i in 0..m {
                for p in 0..k {
                    let a_scale = lhs.scaled.then(|| sa[i * k / 32 + p / 32]);
                    let (a, a_flushed) = (scaled(a_at(i, p), a_scale), flushed(a_at(i, p), a_scale));
                    for j in 0..n {
                        let b_scale = rhs.scaled.then(|| sb[j * k / 32 + p / 32]);
                        let b = scaled(b_at(p, j), b_scale);
                        want[i * n + j] += a * b;
                        want_flushed[i * n + j] += a_flushed * flushed(b_at(p, j), b_scale);
                        magnitude[i * n + j] += (a * b).abs();
                    }
                }
            }
            let flushes = tiny && d.properties().backend == Backend::Vulkan;
            let kernel = kernel(lhs, rhs, fast_math, size);
            let c = d.zeros::<f32>(m * n).unwrap();
            let (a, b) = (
                Stored::upload(d, lhs.stored, &a_bytes),
                Stored::upload(d, rhs.stored, &b_bytes),
            );
            let (sa, sb) = (d.upload(&sa).unwrap(), d.upload(&sb).unwrap());
            let args = [
                a.raw().into(),
                b.raw().into(),
                (&sa).into(),
                (&sb).into(),
                (&c).into(),
                (m as i32).into(),
                (n as i32).into(),
            ];
            d.launch(&kernel, &LaunchConfig::grid1(1).num_warps(4), &args)
                .unwrap_or_else(|e| panic!("{}: {at}: {e}", d.id()));
            let got = d.download(&c).unwrap();
            let mut nans = 0;
            for (e, (&g, &w)) in got.iter().zip(&want).enumerate() {
                if w.is_nan() {
                    assert!(g.is_nan(), "{}: {at}: element {e}: {g}, a NaN scale's", d.id());
                    nans += 1;
                    continue;
                }
                // The f32 sums' rounding, bounded by the products' magnitudes.
                let close = |w: f64| (g as f64 - w).abs() <= magnitude[e] * 2f64.powi(-16);
                assert!(
                    close(w) || (flushes && close(want_flushed[e])),
                    "{}: {at}: element {e} (row {}, column {}): {g} against {w}",
                    d.id(),
                    e / n,
                    e % n
                );
            }
            assert_eq!(nans, if nan { n } else { 0 }, "{}: {at}: the NaN row", d.id());
        }
        println!("{}: every dot_scaled case matches", d.id());
    }
}
