//! The op conformance matrix: every op of the kernel language on every element type it
//! accepts, run on the interpreter (the reference) and on every other device present, and
//! compared element by element.
//!
//! A case is one op on one element type at one shape: a kernel, its input buffers (random,
//! with the special values of the type), and a comparison rule. [`run_matrix`] runs every
//! case on every device and returns a [`Matrix`] of outcomes: pass, FAIL, UNSUPPORTED (the
//! device says it cannot run the op or type: reported, not a failure) or KNOWN (a mismatch
//! already understood and listed in the case table with its reason).
//!
//! Comparison rules:
//! * integer, bit and comparison ops, casts, bitcasts, `minimum`/`maximum`, `floor`, `ceil`,
//!   `abs`, `neg`, loads and stores: bit-exact (every NaN matches every NaN);
//! * IEEE-exact float ops (`add sub mul div sqrt fma`, and `rem`, which the PTX backend
//!   computes exactly): exact, except where a backend documents otherwise ([`FLOAT_BOUNDS`]);
//! * transcendental functions: within the documented bounds of [`FLOAT_BOUNDS`];
//! * float reductions: within `n·eps·Σ|x|` (the order of the additions differs);
//! * atomics: the final memory against the interpreter's (exact, or the reduction tolerance
//!   for `f32` add), and the old values returned checked for consistency (`xchg`, `cas`).
//!
//! On Vulkan devices the comparison also accepts what the Vulkan specification allows
//! ("Precision and Operation of SPIR-V Instructions"): results computed with `f16`/`f32`
//! subnormals flushed to zero, and the allowances of the private `vulkan_allowances`
//! module, the one place that loosens it: the half-precision `sin`/`cos` bound, `minimum`/
//! `maximum` of two subnormals giving either operand (pass), and `div` by a divisor outside
//! the specification's range (KNOWN, element by element: any other mismatch still fails).

use rutile::ir::BuildError;
use rutile::{Arg, Backend, CpuDevice, Device, Error, Kernel, KernelBuilder, LaunchConfig, ScalarType, Value};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use ScalarType::*;

/// The element types of the matrix (booleans are covered through comparisons and masks).
pub const DTYPES: [ScalarType; 12] = [I8, I16, I32, I64, U8, U16, U32, U64, F16, BF16, F32, F64];

/// Elements per program of the element-wise kernels.
const BLOCK: i32 = 256;
/// The ragged length: four programs, the last one partly masked.
const RAGGED: usize = 1000;

// ---------------------------------------------------------------------------------------------
// Host values

/// One element, decoded: floats widened to f64 (exactly), integers to i128.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum V {
    F(f64),
    I(i128),
}

impl V {
    fn f(self) -> f64 {
        match self {
            V::F(x) => x,
            V::I(i) => i as f64,
        }
    }
    fn i(self) -> i128 {
        match self {
            V::F(x) => x as i128,
            V::I(i) => i,
        }
    }
    fn is_nan(self) -> bool {
        matches!(self, V::F(x) if x.is_nan())
    }
}

impl std::fmt::Display for V {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            V::F(x) if x.is_nan() => write!(f, "NaN"),
            V::F(x) => write!(f, "{x:e} ({:#018x})", x.to_bits()),
            V::I(i) => write!(f, "{i}"),
        }
    }
}

fn int_range(t: ScalarType) -> (i128, i128) {
    let bits = t.bits();
    if t.is_unsigned_int() {
        (0, (1i128 << bits) - 1)
    } else {
        (-(1i128 << (bits - 1)), (1i128 << (bits - 1)) - 1)
    }
}

/// Rounds `v` to a value of type `t` (floats round to nearest, integers wrap).
fn quantize(t: ScalarType, v: V) -> V {
    decode(t, &encode(t, &[v]))[0]
}

fn encode(t: ScalarType, vals: &[V]) -> Vec<u8> {
    let mut out = Vec::with_capacity(vals.len() * t.size_bytes());
    for &v in vals {
        match t {
            F16 => out.extend(half::f16::from_f64(v.f()).to_le_bytes()),
            BF16 => out.extend(half::bf16::from_f64(v.f()).to_le_bytes()),
            F32 => out.extend((v.f() as f32).to_le_bytes()),
            F64 => out.extend(v.f().to_le_bytes()),
            _ => {
                let i = v.i();
                out.extend(&i.to_le_bytes()[..t.size_bytes()]);
            }
        }
    }
    out
}

fn decode(t: ScalarType, bytes: &[u8]) -> Vec<V> {
    bytes
        .chunks_exact(t.size_bytes())
        .map(|c| match t {
            F16 => V::F(half::f16::from_le_bytes([c[0], c[1]]).to_f64()),
            BF16 => V::F(half::bf16::from_le_bytes([c[0], c[1]]).to_f64()),
            F32 => V::F(f32::from_le_bytes(c.try_into().unwrap()) as f64),
            F64 => V::F(f64::from_le_bytes(c.try_into().unwrap())),
            _ => {
                let mut b = [0u8; 16];
                b[..c.len()].copy_from_slice(c);
                let fill = if t.is_signed_int() && c[c.len() - 1] & 0x80 != 0 {
                    0xff
                } else {
                    0
                };
                b[c.len()..].fill(fill);
                V::I(i128::from_le_bytes(b))
            }
        })
        .collect()
}

// ---------------------------------------------------------------------------------------------
// Inputs

/// A deterministic generator (splitmix64).
pub struct Rng(u64);
impl Rng {
    pub fn new(seed: u64) -> Rng {
        Rng(seed ^ 0x5DEE_CE66_D1CE_4E5B)
    }
    fn u64(&mut self) -> u64 {
        self.0 = self.0.wrapping_add(0x9E37_79B9_7F4A_7C15);
        let mut z = self.0;
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    }
    fn unit(&mut self) -> f64 {
        (self.u64() >> 11) as f64 / (1u64 << 53) as f64
    }
    fn range(&mut self, lo: f64, hi: f64) -> f64 {
        lo + (hi - lo) * self.unit()
    }
    fn below(&mut self, n: u64) -> u64 {
        self.u64() % n
    }
    fn pick<T: Copy>(&mut self, xs: &[T]) -> T {
        xs[self.below(xs.len() as u64) as usize]
    }
}

/// What values an input takes.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum Domain {
    /// Anything of the type: special values (±0, ±inf, NaN, subnormals, the largest
    /// magnitudes; MIN, MAX, -1, 0) and random values.
    General,
    /// As `General` without 0 for integers (divisors: integer division by zero is
    /// unspecified on GPUs).
    NonZero,
    /// Shift amounts: 0 to the width + 2.
    Shift,
    /// Floats uniform in `[lo, hi]` and spread over magnitudes `2^lo2 .. 2^hi2` (both signs
    /// if `lo < 0`), plus ±0, ±inf and NaN: the argument range of a transcendental.
    Range { lo: f64, hi: f64, lo2: i32, hi2: i32 },
    /// Finite floats of moderate size (sums, atomic adds), or integers in the full range.
    Moderate,
    /// 0 or 1.
    Flag,
}

fn float_specials(t: ScalarType) -> Vec<f64> {
    let (min_sub, max_sub, min_norm, max) = match t {
        F16 => (2f64.powi(-24), 2f64.powi(-14) - 2f64.powi(-24), 2f64.powi(-14), 65504.0),
        BF16 => (
            2f64.powi(-133),
            2f64.powi(-126) - 2f64.powi(-133),
            2f64.powi(-126),
            half::bf16::MAX.to_f64(),
        ),
        F32 => (
            f32::from_bits(1) as f64,
            f32::from_bits(0x007f_ffff) as f64,
            f32::MIN_POSITIVE as f64,
            f32::MAX as f64,
        ),
        _ => (
            f64::from_bits(1),
            f64::from_bits(0x000f_ffff_ffff_ffff),
            f64::MIN_POSITIVE,
            f64::MAX,
        ),
    };
    vec![
        0.0,
        -0.0,
        f64::INFINITY,
        f64::NEG_INFINITY,
        f64::NAN,
        min_sub,
        -min_sub,
        max_sub,
        min_norm,
        -min_norm,
        max,
        -max,
        1.0,
        -1.0,
        0.5,
        2.5,
        -2.5,
        3.0,
    ]
}

fn int_specials(t: ScalarType) -> Vec<i128> {
    let (min, max) = int_range(t);
    vec![min, max, min + 1, max - 1, -1, 0, 1, 2, -2, 7]
}

/// `n` values of type `t` from `domain`, never all zero; the first ones are the special
/// values (so that a single-element case still sees one of them, seeded).
pub fn generate(t: ScalarType, n: usize, domain: Domain, seed: u64) -> Vec<V> {
    let mut rng = Rng::new(seed.wrapping_mul(0x2545_F491_4F6C_DD1D) ^ t.bits() as u64);
    let mut out: Vec<V> = Vec::with_capacity(n);
    if t.is_float() {
        let specials = float_specials(t);
        for i in 0..n {
            let x = match domain {
                Domain::General | Domain::NonZero => match rng.below(4) {
                    0 => rng.pick(&specials),
                    1 => rng.range(-10.0, 10.0),
                    _ => {
                        let (lo, hi) = match t {
                            F16 => (-25, 16),
                            BF16 => (-134, 128),
                            F32 => (-150, 128),
                            _ => (-1075, 1024),
                        };
                        let e = rng.range(lo as f64, hi as f64).floor() as i32;
                        let s = if rng.below(2) == 0 { 1.0 } else { -1.0 };
                        s * rng.range(1.0, 2.0) * 2f64.powi(e)
                    }
                },
                Domain::Range { lo, hi, lo2, hi2 } => match rng.below(8) {
                    0 => rng.pick(&[0.0, -0.0, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, 1.0]),
                    1..=4 => rng.range(lo, hi),
                    _ => {
                        let e = rng.range(lo2 as f64, hi2 as f64).floor() as i32;
                        let s = if lo < 0.0 && rng.below(2) == 0 { -1.0 } else { 1.0 };
                        (s * rng.range(1.0, 2.0) * 2f64.powi(e)).clamp(lo, hi)
                    }
                },
                Domain::Moderate => {
                    let e = rng.range(-8.0, 8.0).floor() as i32;
                    let s = if rng.below(2) == 0 { 1.0 } else { -1.0 };
                    s * rng.range(1.0, 2.0) * 2f64.powi(e)
                }
                Domain::Shift => rng.below(t.bits() as u64 + 3) as f64,
                Domain::Flag => rng.below(2) as f64,
            };
            // The first elements: the special values in order (General only).
            let x = if matches!(domain, Domain::General | Domain::NonZero)
                && i < specials.len()
                && seed.is_multiple_of(2)
            {
                specials[i]
            } else {
                x
            };
            // Transcendental ranges are f32 ranges (f64 transcendentals have f32 range on
            // some backends): round through f32 first.
            let x = if matches!(domain, Domain::Range { .. }) {
                x as f32 as f64
            } else {
                x
            };
            out.push(quantize(t, V::F(x)));
        }
    } else {
        let specials = int_specials(t);
        let (min, max) = int_range(t);
        for i in 0..n {
            let x = match domain {
                Domain::Shift => rng.below(t.bits() as u64 + 3) as i128,
                Domain::Flag => rng.below(2) as i128,
                _ => match rng.below(4) {
                    0 => rng.pick(&specials),
                    1 => rng.range(-100.0, 100.0) as i128,
                    _ => rng.u64() as i128 | ((rng.u64() as i128) << 64),
                },
            };
            let x = if matches!(domain, Domain::General | Domain::NonZero | Domain::Moderate)
                && i < specials.len()
                && seed.is_multiple_of(2)
            {
                specials[i]
            } else {
                x
            };
            let mut v = quantize(t, V::I(x.clamp(i128::MIN / 2, i128::MAX / 2)));
            if domain == Domain::NonZero && v == V::I(0) {
                v = V::I(if min < 0 { -1 } else { max });
            }
            out.push(v);
        }
    }
    if out.iter().all(|v| v.f() == 0.0) {
        out[0] = quantize(t, V::I(1));
    }
    out
}

// ---------------------------------------------------------------------------------------------
// Bounds

/// A documented error bound of a float op on one backend: `ulp + ulp_per_x·|x|` ulps of the
/// result, or an absolute `abs` (for `x` within `abs_in`), whichever is larger.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bound {
    pub ulp: f64,
    pub ulp_per_x: f64,
    pub abs: f64,
    pub abs_in: (f64, f64),
}

const fn ulps(ulp: f64) -> Bound {
    Bound {
        ulp,
        ulp_per_x: 0.0,
        abs: 0.0,
        abs_in: (0.0, 0.0),
    }
}
/// Just above π, so that ±π are inside the ranges where sin/cos bounds hold.
const PI_AND_A_BIT: f64 = std::f64::consts::PI + 1e-5;

const EXACT: Bound = ulps(0.0);

/// The documented accuracy of the float ops that are not exact, per backend:
/// `(op, PTX, SPIR-V/Vulkan)`.
///
/// * PTX: the table "Accuracy" in `backend-ptx/src/math.rs` (f32; f16 and bf16 compute in
///   f32 and round once; f64 transcendentals are not supported there). `sqrt`, `div`,
///   `fma`, `rem` are exact.
/// * SPIR-V: `backend-spirv/src/lib.rs` ("Semantics") says `exp exp2 log log2 sin cos sqrt
///   rsqrt div rem fma` are the device's, with the precision of GLSL.std.450 / SPIR-V, i.e.
///   the Vulkan specification's table "Precision of core SPIR-V instructions": `div` 2.5 ulp;
///   `sqrt` inherited from `1/inversesqrt` (taken as 3 ulp); `inversesqrt` 2 ulp; `exp`,
///   `exp2` 3 + 2·|x| ulp; `log`, `log2` 3 ulp, absolute 2^-21 inside [0.5, 2]; `sin`, `cos`
///   absolute 2^-11 inside [-π, π] (`f16`: 2^-7, from `vulkan_allowances`, which also
///   holds what the specification leaves undefined, such as `div` by a divisor outside
///   [2^-126, 2^126]); `fma` and `rem` exact here (the specification lets
///   `fma` be `mul` then `add`, and `rem` be `x - y·trunc(x/y)`: mismatches show as KNOWN);
///   `erf` 2.5 ulp (the backend's own polynomial); `sigmoid` is `1 / (1 + exp(-x))`, the
///   `exp` bound plus the division's. `f64` transcendentals are computed in `f32` there:
///   f32 accuracy.
pub const FLOAT_BOUNDS: &[(&str, Bound, Bound)] = &[
    ("add", EXACT, EXACT),
    ("sub", EXACT, EXACT),
    ("mul", EXACT, EXACT),
    ("div", EXACT, ulps(2.5)),
    ("sqrt", EXACT, ulps(3.0)),
    ("fma", EXACT, EXACT),
    ("rem", EXACT, EXACT),
    (
        "exp",
        ulps(2.3),
        Bound {
            ulp: 3.0,
            ulp_per_x: 2.0,
            abs: 0.0,
            abs_in: (0.0, 0.0),
        },
    ),
    (
        "exp2",
        ulps(2.0),
        Bound {
            ulp: 3.0,
            ulp_per_x: 2.0,
            abs: 0.0,
            abs_in: (0.0, 0.0),
        },
    ),
    (
        "log",
        Bound {
            ulp: 3.3,
            ulp_per_x: 0.0,
            abs: 1.6e-7,
            abs_in: (0.5, 1.5),
        },
        Bound {
            ulp: 3.0,
            ulp_per_x: 0.0,
            abs: 4.77e-7,
            abs_in: (0.5, 2.0),
        },
    ),
    (
        "log2",
        Bound {
            ulp: 2.2,
            ulp_per_x: 0.0,
            abs: 2.1e-7,
            abs_in: (0.5, 1.5),
        },
        Bound {
            ulp: 3.0,
            ulp_per_x: 0.0,
            abs: 4.77e-7,
            abs_in: (0.5, 2.0),
        },
    ),
    ("rsqrt", ulps(1.5), ulps(2.0)),
    (
        "sin",
        Bound {
            ulp: 0.0,
            ulp_per_x: 0.0,
            abs: 4e-7,
            abs_in: (-PI_AND_A_BIT, PI_AND_A_BIT),
        },
        Bound {
            ulp: 0.0,
            ulp_per_x: 0.0,
            abs: 4.9e-4,
            abs_in: (-PI_AND_A_BIT, PI_AND_A_BIT),
        },
    ),
    (
        "cos",
        Bound {
            ulp: 0.0,
            ulp_per_x: 0.0,
            abs: 4e-7,
            abs_in: (-PI_AND_A_BIT, PI_AND_A_BIT),
        },
        Bound {
            ulp: 0.0,
            ulp_per_x: 0.0,
            abs: 4.9e-4,
            abs_in: (-PI_AND_A_BIT, PI_AND_A_BIT),
        },
    ),
    ("erf", ulps(1.2), ulps(2.5)),
    (
        "sigmoid",
        ulps(3.5),
        Bound {
            ulp: 5.5,
            ulp_per_x: 2.0,
            abs: 0.0,
            abs_in: (0.0, 0.0),
        },
    ),
];

/// The bound of `op` on element type `t` on `backend`: [`FLOAT_BOUNDS`], except where the
/// Vulkan specification's half-precision column differs ([`vulkan_allowances::bound`]).
fn bound_for(op: &str, t: ScalarType, backend: Backend) -> Bound {
    if backend == Backend::Vulkan {
        if let Some(b) = vulkan_allowances::bound(op, t) {
            return b;
        }
    }
    let row = FLOAT_BOUNDS.iter().find(|r| r.0 == op);
    match (row, backend) {
        (None, _) | (_, Backend::Interpreter) => EXACT,
        (Some(r), Backend::Cuda) => r.1,
        (Some(r), _) => r.2,
    }
}

/// What the Vulkan specification lets a Vulkan device do beyond [`FLOAT_BOUNDS`]: the one
/// place where the matrix loosens its comparison for Vulkan (never for CUDA or the
/// interpreter). Everything here cites the Vulkan specification, appendix "Vulkan
/// Environment for SPIR-V", section "Precision and Operation of SPIR-V Instructions"
/// (`#spirvenv-precision-operation`), its list of rules on denormals and its tables
/// "Precision of core SPIR-V Instructions" and "Precision of GLSL.std.450 Instructions".
///
/// The flushing of subnormals that the same section allows is handled separately, by
/// comparing with a flushed reference ([`flushed_reference`]); what is here is what that
/// does not cover.
mod vulkan_allowances {
    use super::{flush, flushable, same, Bound, PI_AND_A_BIT, V};
    use rutile::ScalarType::{self, *};

    /// The verdict on one element that missed the reference.
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub(super) enum Allowance {
        /// The specification allows this result: the element passes.
        Accepted,
        /// The specification leaves the result undefined: the element is excused and the
        /// case is KNOWN, with this reason.
        Known(&'static str),
    }

    /// "Precision of GLSL.std.450 Instructions": `sin()` and `cos()` have absolute error
    /// <= 2^-11 inside [-π, π] in single precision but only <= 2^-7 in half precision
    /// (nothing is guaranteed outside [-π, π]). The single-precision bound is
    /// [`FLOAT_BOUNDS`]'s; this is the half-precision one, where it differs.
    pub(super) fn bound(op: &str, t: ScalarType) -> Option<Bound> {
        match (op, t) {
            ("sin" | "cos", F16) => Some(Bound {
                ulp: 0.0,
                ulp_per_x: 0.0,
                abs: SIN_COS_F16_ABS,
                abs_in: (-PI_AND_A_BIT, PI_AND_A_BIT),
            }),
            _ => None,
        }
    }

    /// 2^-7, the half-precision absolute bound of `sin()` and `cos()` in [-π, π].
    const SIN_COS_F16_ABS: f64 = 0.0078125;

    pub(super) const DIV_OUT_OF_RANGE: &str = "Vulkan spec, Precision and Operation of SPIR-V Instructions: \
        OpFDiv(x,y) is 2.5 ULP only for |y| in [2^-126, 2^126] (half: [2^-14, 2^14]), \
        undefined precision outside (divisor zero or subnormal with a dividend that may be flushed to zero, \
        or out of range)";

    /// Whether the Vulkan specification allows `got` for element-wise `op` on `t` with
    /// inputs `inputs`, where `got` missed the reference (and its flushed versions).
    /// `None`: it does not, the element fails.
    pub(super) fn element(op: &str, t: ScalarType, inputs: &[V], got: V) -> Option<Allowance> {
        match op {
            // "Precision of core SPIR-V Instructions": OpFDiv(x,y) is 2.5 ULP for |y| in
            // [2^-126, 2^126] in single precision, [2^-14, 2^14] in half; outside that
            // range the table gives no precision, i.e. the result is undefined. The same
            // section's rule "Dividing a non-zero by a zero results in the appropriately
            // signed IEEE 754 infinity" still holds for a zero divisor, so a zero divisor
            // is excused only when the dividend is zero, NaN or subnormal (a subnormal may
            // be flushed to zero on input, and 0/0 is not mathematically defined).
            "div" if flushable(t) && inputs.len() == 2 => {
                let (x, y) = (inputs[0].f(), inputs[1].f());
                let (lo, hi) = match t {
                    F16 => (2f64.powi(-14), 2f64.powi(14)),
                    _ => (2f64.powi(-126), 2f64.powi(126)),
                };
                let in_range = y.abs() >= lo && y.abs() <= hi;
                let nonzero_by_zero = y == 0.0 && !x.is_nan() && flush(t, inputs[0]).f() != 0.0;
                (!y.is_nan() && !in_range && !nonzero_by_zero).then_some(Allowance::Known(DIV_OUT_OF_RANGE))
            }
            // Denormals: "any half, single, or double-precision denormalized value input
            // into a shader or potentially generated by any instruction ... may be flushed
            // to zero" (without the DenormPreserve execution mode, which naga cannot emit),
            // except for the listed instructions, among them OpSelect. backend-spirv's
            // minimum/maximum compare and select: when both operands are subnormal or zero
            // they may compare as two equal zeros, and the select then returns either
            // operand's bits unflushed. Either operand (or its flushed value) is accepted.
            "minimum" | "maximum" if flushable(t) && inputs.len() == 2 => {
                let (a, b) = (inputs[0], inputs[1]);
                let zeros = [a, b].iter().all(|&v| !v.is_nan() && flush(t, v).f() == 0.0);
                let either = [a, b, flush(t, a), flush(t, b)].iter().any(|&v| same(v, got));
                (zeros && either).then_some(Allowance::Accepted)
            }
            _ => None,
        }
    }
}

/// One unit in the last place of `x` in type `t`.
fn ulp(t: ScalarType, x: f64) -> f64 {
    let (mant, min_exp) = match t {
        F16 => (10, -14),
        BF16 => (7, -126),
        F32 => (23, -126),
        _ => (52, -1022),
    };
    let e = if x == 0.0 || !x.is_finite() {
        min_exp
    } else {
        (x.abs().log2().floor() as i32).max(min_exp)
    };
    2f64.powi(e - mant)
}

/// Whether `got` is within `bound` of the reference `want` for argument `x`.
fn within(t: ScalarType, backend: Backend, bound: Bound, x: f64, want: f64, got: f64) -> bool {
    if want.is_nan() || got.is_nan() {
        return want.is_nan() && got.is_nan();
    }
    if want == got {
        return want != 0.0 || bound != EXACT || want.is_sign_negative() == got.is_sign_negative();
    }
    if bound == EXACT || want.is_infinite() || got.is_infinite() {
        return false;
    }
    // The unit: f32 ulps for f32 and f64 (f64 transcendentals have f32 accuracy on Vulkan
    // and are unsupported on PTX), plus one ulp of the type for f16/bf16 (computed in f32 and
    // rounded once on PTX); Vulkan's f16 precision is in f16 ulps.
    let unit_type = match (t, backend) {
        (F16, Backend::Cuda) | (BF16, _) | (F64, _) => F32,
        (t, _) => t,
    };
    let mut tol = (bound.ulp + bound.ulp_per_x * x.abs()) * ulp(unit_type, want);
    if matches!(t, F16 | BF16) {
        tol += ulp(t, want);
    }
    if x > bound.abs_in.0 && x < bound.abs_in.1 {
        tol = tol.max(bound.abs);
    }
    (got - want).abs() <= tol
}

// ---------------------------------------------------------------------------------------------
// Cases

/// How a case's outputs are compared with the interpreter's.
#[derive(Clone, Copy, Debug)]
pub enum Rule {
    /// Bit-exact (NaN matches NaN).
    Exact,
    /// Element-wise within the bound of [`FLOAT_BOUNDS`] for this op; `arg` is the input
    /// giving `x` of the bound.
    Float { op: &'static str, arg: usize },
    /// Output 0 within `n·eps·Σ|x|` of the interpreter's, where the sum runs over input 0
    /// (reshaped to `[rows, n]`, reduced along the last axis, or along axis 0 if `axis0`).
    Sum { rows: usize, n: usize, axis0: bool },
    /// Atomics: final memory (output 0) exact against the interpreter's (or the sum
    /// tolerance for `f32` add), then the returned old values (output 1) checked.
    Atomic { op: &'static str },
}

/// A buffer of a case: its type and initial contents; outputs are read back and compared.
#[derive(Clone, Debug)]
pub struct Buf {
    pub dtype: ScalarType,
    pub init: Vec<V>,
    pub output: bool,
}

/// One op on one element type at one shape.
pub struct Case {
    /// The row of the matrix (the op, with a variant such as `sum(2d,axis1)`).
    pub op: String,
    /// The column.
    pub dtype: ScalarType,
    /// The shape, for reports: `1`, `1000/256`, `16x32`, ...
    pub shape: String,
    /// The kernel, or why the builder rejects the op on this type (then the op does not
    /// accept the type: listed as "not accepted", not run).
    pub kernel: Result<Kernel, String>,
    pub bufs: Vec<Buf>,
    /// The `i32` scalar parameter after the buffers (the number of elements).
    pub n: Option<i32>,
    pub grid: u32,
    pub rule: Rule,
    /// Known mismatches: `(backend, reason)`; a failure on that backend is KNOWN.
    pub known: Vec<(Backend, &'static str)>,
}

impl Case {
    /// Marks a known mismatch on `backend`.
    pub fn known_failure(mut self, backend: Backend, reason: &'static str) -> Case {
        self.known.push((backend, reason));
        self
    }
}

fn built(r: Result<Kernel, BuildError>) -> Result<Kernel, String> {
    r.map_err(|e| e.to_string())
}

fn kname(op: &str, t: &[ScalarType]) -> String {
    let mut s = format!("conf_{}", op.replace(|c: char| !c.is_ascii_alphanumeric(), "_"));
    for t in t {
        s.push('_');
        s.push_str(t.name());
    }
    s
}

/// An element-wise kernel: loads each input (masked, `i < n`), applies `f`, stores into an
/// output of type `out`.
fn elementwise<F>(name: &str, ins: &[ScalarType], out: ScalarType, f: F) -> Result<Kernel, String>
where
    F: for<'b> Fn(&'b KernelBuilder, &[Value<'b>]) -> Value<'b>,
{
    built(Kernel::build(name, |k| {
        let ptrs: Vec<Value> = ins
            .iter()
            .enumerate()
            .map(|(i, &t)| k.arg_ptr(&format!("in{i}"), t))
            .collect();
        let o = k.arg_ptr("out", out);
        let n = k.arg_i32("n");
        let offs = k.program_id(0) * BLOCK + k.arange(0, BLOCK);
        let mask = offs.lt(n);
        let xs: Vec<Value> = ptrs.iter().map(|&p| k.load_masked(p + offs, mask, 0)).collect();
        let y = f(k, &xs);
        k.store_masked(o + offs, y, mask);
    }))
}

/// Element-wise cases at the two lengths (1 and ragged), inputs from `domains`.
fn elementwise_cases<F>(op: &str, ins: &[(ScalarType, Domain)], out: ScalarType, rule: Rule, f: F) -> Vec<Case>
where
    F: for<'b> Fn(&'b KernelBuilder, &[Value<'b>]) -> Value<'b>,
{
    let types: Vec<ScalarType> = ins.iter().map(|p| p.0).collect();
    let mut all = types.clone();
    all.push(out);
    let kernel = elementwise(&kname(op, &all), &types, out, f);
    let column = ins[0].0;
    [1usize, RAGGED]
        .iter()
        .enumerate()
        .map(|(variant, &n)| {
            let mut bufs: Vec<Buf> = ins
                .iter()
                .enumerate()
                .map(|(i, &(t, d))| Buf {
                    dtype: t,
                    init: generate(
                        t,
                        n,
                        d,
                        (variant * 31 + i * 7) as u64 + 2 * (n == 1) as u64 * (i as u64 + 1),
                    ),
                    output: false,
                })
                .collect();
            bufs.push(Buf {
                dtype: out,
                init: vec![V::I(0); n],
                output: true,
            });
            Case {
                op: op.to_string(),
                dtype: column,
                shape: if n == 1 { "1".into() } else { format!("{n}/{BLOCK}") },
                kernel: kernel.clone(),
                bufs,
                n: Some(n as i32),
                grid: (n as u32).div_ceil(BLOCK as u32),
                rule,
                known: Vec::new(),
            }
        })
        .collect()
}

fn transcendental_domain(op: &str) -> Domain {
    use std::f64::consts::PI;
    match op {
        "exp" => Domain::Range {
            lo: -87.0,
            hi: 88.0,
            lo2: -20,
            hi2: 6,
        },
        "exp2" => Domain::Range {
            lo: -126.0,
            hi: 127.0,
            lo2: -20,
            hi2: 6,
        },
        "log" | "log2" => Domain::Range {
            lo: 0.0,
            hi: 3.0,
            lo2: -20,
            hi2: 20,
        },
        "rsqrt" => Domain::Range {
            lo: 0.0,
            hi: 100.0,
            lo2: -100,
            hi2: 100,
        },
        "sin" | "cos" => Domain::Range {
            lo: -PI,
            hi: PI,
            lo2: -20,
            hi2: 1,
        },
        "erf" => Domain::Range {
            lo: -6.0,
            hi: 6.0,
            lo2: -20,
            hi2: 2,
        },
        "sigmoid" => Domain::Range {
            lo: -80.0,
            hi: 80.0,
            lo2: -20,
            hi2: 6,
        },
        _ => Domain::General,
    }
}

type UnaryFn = for<'b> fn(Value<'b>) -> Value<'b>;

fn unary_cases() -> Vec<Case> {
    let ops: [(&str, UnaryFn); 15] = [
        ("neg", |x| -x),
        ("not", |x| !x),
        ("abs", |x| x.abs()),
        ("exp", |x| x.exp()),
        ("exp2", |x| x.exp2()),
        ("log", |x| x.log()),
        ("log2", |x| x.log2()),
        ("sqrt", |x| x.sqrt()),
        ("rsqrt", |x| x.rsqrt()),
        ("sin", |x| x.sin()),
        ("cos", |x| x.cos()),
        ("floor", |x| x.floor()),
        ("ceil", |x| x.ceil()),
        ("erf", |x| x.erf()),
        ("sigmoid", |x| x.sigmoid()),
    ];
    let mut cases = Vec::new();
    for (op, f) in ops {
        for t in DTYPES {
            let exact = matches!(op, "neg" | "not" | "abs" | "floor" | "ceil");
            let rule = if exact || !t.is_float() {
                Rule::Exact
            } else {
                Rule::Float { op, arg: 0 }
            };
            let domain = if t.is_float() {
                transcendental_domain(op)
            } else {
                Domain::General
            };
            cases.extend(elementwise_cases(op, &[(t, domain)], t, rule, move |_, x| f(x[0])));
        }
    }
    cases
}

type BinaryFn = for<'b> fn(&'b KernelBuilder, Value<'b>, Value<'b>) -> Value<'b>;

fn binary_cases() -> Vec<Case> {
    let ops: [(&str, BinaryFn); 13] = [
        ("add", |_, a, b| a + b),
        ("sub", |_, a, b| a - b),
        ("mul", |_, a, b| a * b),
        ("div", |_, a, b| a / b),
        ("rem", |_, a, b| a % b),
        ("cdiv", |k, a, b| k.cdiv(a, b)),
        ("and", |_, a, b| a & b),
        ("or", |_, a, b| a | b),
        ("xor", |_, a, b| a ^ b),
        ("shl", |_, a, b| a << b),
        ("shr", |_, a, b| a >> b),
        ("minimum", |k, a, b| k.minimum(a, b)),
        ("maximum", |k, a, b| k.maximum(a, b)),
    ];
    let mut cases = Vec::new();
    for (op, f) in ops {
        for t in DTYPES {
            let db = match op {
                "div" | "rem" | "cdiv" => Domain::NonZero,
                "shl" | "shr" => Domain::Shift,
                _ => Domain::General,
            };
            let rule = if t.is_float() {
                Rule::Float { op, arg: 0 }
            } else {
                Rule::Exact
            };
            cases.extend(elementwise_cases(
                op,
                &[(t, Domain::General), (t, db)],
                t,
                rule,
                move |k, x| f(k, x[0], x[1]),
            ));
        }
    }
    let cmps: [(&str, BinaryFn); 6] = [
        ("lt", |_, a, b| a.lt(b)),
        ("le", |_, a, b| a.le(b)),
        ("gt", |_, a, b| a.gt(b)),
        ("ge", |_, a, b| a.ge(b)),
        ("eq", |_, a, b| a.eq(b)),
        ("ne", |_, a, b| a.ne(b)),
    ];
    for (op, f) in cmps {
        for t in DTYPES {
            // Compare x with a copy of itself shuffled into y half of the time (equal values).
            let mut cs = elementwise_cases(
                op,
                &[(t, Domain::General), (t, Domain::General)],
                I32,
                Rule::Exact,
                move |k, x| f(k, x[0], x[1]),
            );
            for c in &mut cs {
                let x = c.bufs[0].init.clone();
                for (i, y) in c.bufs[1].init.iter_mut().enumerate() {
                    if i % 3 == 0 {
                        *y = x[(i * 7) % x.len()];
                    }
                }
            }
            cases.extend(cs);
        }
    }
    for t in DTYPES {
        cases.extend(elementwise_cases(
            "where",
            &[(t, Domain::General), (t, Domain::General), (I32, Domain::Flag)],
            t,
            Rule::Exact,
            |k, x| k.where_(x[2].ne(0), x[0], x[1]),
        ));
        let rule = if t.is_float() {
            Rule::Float { op: "fma", arg: 0 }
        } else {
            Rule::Exact
        };
        cases.extend(elementwise_cases(
            "fma",
            &[(t, Domain::General), (t, Domain::General), (t, Domain::General)],
            t,
            rule,
            |_, x| x[0].fma(x[1], x[2]),
        ));
    }
    cases
}

fn cast_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for from in DTYPES {
        for to in DTYPES {
            if from == to {
                continue;
            }
            let op = format!("cast->{}", to.name());
            let mut cs = elementwise_cases(&op, &[(from, Domain::General)], to, Rule::Exact, move |_, x| {
                x[0].to(to)
            });
            for c in &mut cs {
                c.dtype = from;
            }
            cases.extend(cs);
        }
    }
    let groups: [&[ScalarType]; 4] = [&[I8, U8], &[I16, U16, F16, BF16], &[I32, U32, F32], &[I64, U64, F64]];
    for g in groups {
        for &from in g {
            for &to in g {
                if from == to {
                    continue;
                }
                let op = format!("bitcast->{}", to.name());
                cases.extend(elementwise_cases(
                    &op,
                    &[(from, Domain::General)],
                    to,
                    Rule::Exact,
                    move |_, x| x[0].bitcast(to),
                ));
            }
        }
    }
    cases
}

/// Masked loads with `other` and masked stores on ragged lengths: the input has `n`
/// elements; positions `n .. n+100` get `other` (3); the rest of the output keeps its
/// initial contents.
fn memory_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for t in DTYPES {
        let kernel = built(Kernel::build(&kname("load_store", &[t]), |k| {
            let x = k.arg_ptr("x", t);
            let o = k.arg_ptr("out", t);
            let n = k.arg_i32("n");
            let offs = k.program_id(0) * BLOCK + k.arange(0, BLOCK);
            let v = k.load_masked(x + offs, offs.lt(n), 3);
            k.store_masked(o + offs, v, offs.lt(n + 100));
        }));
        for (variant, n) in [1usize, RAGGED, 700].into_iter().enumerate() {
            let grid = (n as u32 + 100).div_ceil(BLOCK as u32) + 1;
            let len = grid as usize * BLOCK as usize;
            cases.push(Case {
                op: "load/store masked".into(),
                dtype: t,
                shape: format!("{n}/{BLOCK}"),
                kernel: kernel.clone(),
                bufs: vec![
                    Buf {
                        dtype: t,
                        init: generate(t, n, Domain::General, 100 + variant as u64 * 2),
                        output: false,
                    },
                    Buf {
                        dtype: t,
                        init: generate(t, len, Domain::General, 201 + variant as u64 * 2),
                        output: true,
                    },
                ],
                n: Some(n as i32),
                grid,
                rule: Rule::Exact,
                known: Vec::new(),
            });
        }
    }
    cases
}

type ReduceFn = for<'b> fn(Value<'b>, u32) -> Value<'b>;

fn reduction_cases() -> Vec<Case> {
    let ops: [(&str, ReduceFn); 5] = [
        ("sum", |x, a| x.sum(a)),
        ("max", |x, a| x.max(a)),
        ("min", |x, a| x.min(a)),
        ("argmax", |x, a| x.argmax(a)),
        ("argmin", |x, a| x.argmin(a)),
    ];
    let mut cases = Vec::new();
    for (op, f) in ops {
        for t in DTYPES {
            let out_t = if op.starts_with("arg") { I32 } else { t };
            let domain = if op == "sum" && t.is_float() {
                Domain::Moderate
            } else {
                Domain::General
            };
            // (label, rows, cols, axis): 1-D blocks are [1, cols] reduced along axis 1.
            let shapes: [(&str, u32, u32, Option<u32>); 5] = [
                ("(1d)", 1, 1, None),
                ("(1d)", 1, 256, None),
                ("(2d,axis0)", 16, 32, Some(0)),
                ("(2d,axis1)", 16, 32, Some(1)),
                ("(2d,axis0)", 4, 1, Some(0)),
            ];
            for (variant, (label, rows, cols, axis)) in shapes.into_iter().enumerate() {
                let name = kname(&format!("{op}{label}_{rows}x{cols}"), &[t]);
                let kernel = built(Kernel::build(&name, |k| {
                    let x = k.arg_ptr("x", t);
                    let o = k.arg_ptr("out", out_t);
                    match axis {
                        None => {
                            let v = k.load(x + k.arange(0, cols as i32));
                            k.store(o, f(v, 0));
                        }
                        Some(a) => {
                            let r = k.arange(0, rows as i32);
                            let c = k.arange(0, cols as i32);
                            let v = k.load(x + (r.expand_dims(1) * cols as i32 + c.expand_dims(0)));
                            let len = if a == 0 { cols } else { rows };
                            k.store(o + k.arange(0, len as i32), f(v, a));
                        }
                    }
                }));
                let n = (rows * cols) as usize;
                let out_len = match axis {
                    None => 1,
                    Some(0) => cols as usize,
                    _ => rows as usize,
                };
                let mut init = generate(t, n, domain, 300 + variant as u64 * 2 + (op == "sum") as u64);
                if op.starts_with("arg") && n > 4 {
                    // Ties: the first index wins.
                    for i in (0..n).step_by(5) {
                        init[i] = init[(i * 3) % n];
                    }
                }
                let rule = if op == "sum" && t.is_float() {
                    let (r, c) = (rows as usize, cols as usize);
                    match axis {
                        Some(0) => Rule::Sum {
                            rows: r,
                            n: c,
                            axis0: true,
                        },
                        _ => Rule::Sum {
                            rows: r,
                            n: c,
                            axis0: false,
                        },
                    }
                } else {
                    Rule::Exact
                };
                cases.push(Case {
                    op: format!("{op}{label}"),
                    dtype: t,
                    shape: format!("{rows}x{cols}"),
                    kernel,
                    bufs: vec![
                        Buf {
                            dtype: t,
                            init,
                            output: false,
                        },
                        Buf {
                            dtype: out_t,
                            init: vec![V::I(0); out_len],
                            output: true,
                        },
                    ],
                    n: None,
                    grid: 1,
                    rule,
                    known: Vec::new(),
                });
            }
        }
    }
    cases
}

/// Atomics: 8 programs of 128 lanes, `n = 1000` lanes active, into 4 addresses.
fn atomic_cases() -> Vec<Case> {
    const B: i32 = 128;
    const ADDRS: i32 = 4;
    let mut cases = Vec::new();
    for op in ["atomic_add", "atomic_max", "atomic_min", "atomic_xchg", "atomic_cas"] {
        for t in [I32, U32, I64, U64, F32, F64] {
            let kernel = built(Kernel::build(&kname(op, &[t]), |k| {
                let p = k.arg_ptr("p", t);
                let v = k.arg_ptr("v", t);
                let old = k.arg_ptr("old", t);
                let n = k.arg_i32("n");
                let offs = k.program_id(0) * B + k.arange(0, B);
                let mask = offs.lt(n);
                let x = k.load_masked(v + offs, mask, 0);
                let addr = p + offs % ADDRS;
                let r = match op {
                    "atomic_add" => k.atomic_add(addr, x, Some(mask)),
                    "atomic_max" => k.atomic_max(addr, x, Some(mask)),
                    "atomic_min" => k.atomic_min(addr, x, Some(mask)),
                    "atomic_xchg" => k.atomic_xchg(addr, x, Some(mask)),
                    _ => k.atomic_cas(addr, k.zeros(&[B as u32], t), x, Some(mask)),
                };
                k.store_masked(old + offs, r, mask);
            }));
            for (variant, n) in [1usize, RAGGED].into_iter().enumerate() {
                let grid = (n as u32).div_ceil(B as u32);
                let (init, vals) = match op {
                    // Distinct non-zero values; the memory starts at 0.
                    "atomic_cas" | "atomic_xchg" => (
                        vec![quantize(t, V::I(0)); ADDRS as usize],
                        (0..n).map(|i| quantize(t, V::I(i as i128 + 1))).collect(),
                    ),
                    "atomic_add" if t.is_float() => (
                        generate(t, 4, Domain::Moderate, 1),
                        generate(t, n, Domain::Moderate, 400 + variant as u64),
                    ),
                    // Floats without NaN: the order of NaN-propagating CAS loops is free.
                    _ if t.is_float() => {
                        let mut g = generate(t, n + 4, Domain::General, 402 + variant as u64 * 2);
                        g.iter_mut().filter(|v| v.is_nan()).for_each(|v| *v = V::F(-0.0));
                        (g[n..].to_vec(), g[..n].to_vec())
                    }
                    _ => (
                        generate(t, 4, Domain::General, 3),
                        generate(t, n, Domain::General, 404 + variant as u64 * 2),
                    ),
                };
                cases.push(Case {
                    op: op.to_string(),
                    dtype: t,
                    shape: format!("{n}/{B}->{ADDRS}"),
                    kernel: kernel.clone(),
                    bufs: vec![
                        Buf {
                            dtype: t,
                            init,
                            output: true,
                        },
                        Buf {
                            dtype: t,
                            init: vals,
                            output: false,
                        },
                        Buf {
                            dtype: t,
                            init: vec![V::I(0); n],
                            output: true,
                        },
                    ],
                    n: Some(n as i32),
                    grid,
                    rule: Rule::Atomic { op },
                    known: Vec::new(),
                });
            }
        }
    }
    cases
}

/// Every case of the matrix, with the known mismatches marked.
pub fn cases() -> Vec<Case> {
    let mut all = Vec::new();
    all.extend(unary_cases());
    all.extend(binary_cases());
    all.extend(cast_cases());
    all.extend(memory_cases());
    all.extend(reduction_cases());
    all.extend(atomic_cases());
    all.into_iter().map(mark_known).collect()
}

/// The known mismatches: failures that are understood, shown as KNOWN in the matrix.
fn mark_known(c: Case) -> Case {
    let float = c.dtype.is_float();
    match c.op.as_str() {
        // backend-spirv documents float `rem` as `OpFRem`, whose precision Vulkan defines as
        // that of `x - y·trunc(x/y)`: inexact for large quotients, NaN for `rem(x, ±inf)`
        // (the IR's `fmod` gives `x`).
        "rem" if float => c.known_failure(
            Backend::Vulkan,
            "SPIR-V OpFRem is x - y*trunc(x/y) (documented in backend-spirv), not the exact fmod of the IR",
        ),
        // Vulkan lets `fma` be a multiply then an add (two roundings); lavapipe does that.
        "fma" if float => c.known_failure(
            Backend::Vulkan,
            "Vulkan's fma may round twice (precision inherited from OpFMul and OpFAdd); lavapipe does not fuse",
        ),
        // backend-spirv computes f16 `sigmoid` as `1 / (1 + exp(-x))` in f16: `exp(-x)`
        // overflows for x < -11.09, giving 0 where the result is an f16 subnormal.
        "sigmoid" if c.dtype == F16 => c.known_failure(
            Backend::Vulkan,
            "f16 sigmoid computed in f16 on SPIR-V: exp(-x) overflows for x < -11.09, result 0 instead of a subnormal",
        ),
        _ => c,
    }
}

// ---------------------------------------------------------------------------------------------
// Running

/// The outcome of one case on one device.
#[derive(Clone, Debug)]
pub enum Outcome {
    Pass,
    Fail(String),
    Unsupported(String),
    Known(String),
}

fn run_on(d: &dyn Device, c: &Case, kernel: &Kernel) -> rutile::Result<Vec<Vec<V>>> {
    let mut raws = Vec::new();
    for b in &c.bufs {
        let raw = d.alloc(b.dtype, b.init.len().max(1))?;
        if !b.init.is_empty() {
            d.write(&raw, &encode(b.dtype, &b.init))?;
        }
        raws.push(raw);
    }
    let mut args: Vec<Arg> = raws.iter().map(Arg::Buffer).collect();
    if let Some(n) = c.n {
        args.push(Arg::I32(n));
    }
    rutile::DeviceExt::launch(d, kernel, &LaunchConfig::grid1(c.grid), &args)?;
    let mut outs = Vec::new();
    for (b, raw) in c.bufs.iter().zip(&raws) {
        if b.output {
            let mut v = decode(b.dtype, &d.read(raw)?);
            v.truncate(b.init.len());
            outs.push(v);
        }
    }
    Ok(outs)
}

/// Whether `t` is a float type whose subnormals Vulkan drivers may flush.
fn flushable(t: ScalarType) -> bool {
    matches!(t, F16 | F32)
}

/// Zero (of the same sign) for a subnormal of `t`, the value itself otherwise.
fn flush(t: ScalarType, v: V) -> V {
    let min_normal = match t {
        F16 => 6.103515625e-5,
        F32 => f32::MIN_POSITIVE as f64,
        _ => return v,
    };
    match v {
        V::F(x) if x != 0.0 && x.abs() < min_normal => V::F(0.0f64.copysign(x)),
        v => v,
    }
}

/// The results a device that flushes subnormals may give: the reference with its outputs
/// flushed, and the interpreter's result on flushed inputs, flushed. `None` when the case
/// involves no flushable type.
fn flushed_reference(cpu: &CpuDevice, c: &Case, kernel: &Kernel, want: &[Vec<V>]) -> Option<Vec<Vec<Vec<V>>>> {
    if !c.bufs.iter().any(|b| flushable(b.dtype)) {
        return None;
    }
    let out_types: Vec<ScalarType> = c.bufs.iter().filter(|b| b.output).map(|b| b.dtype).collect();
    let flush_outputs = |outs: &[Vec<V>]| -> Vec<Vec<V>> {
        outs.iter()
            .zip(&out_types)
            .map(|(o, &t)| o.iter().map(|&v| flush(t, v)).collect())
            .collect()
    };
    let mut candidates = vec![flush_outputs(want)];
    let flushed_case = Case {
        op: c.op.clone(),
        dtype: c.dtype,
        shape: c.shape.clone(),
        kernel: Err(String::new()),
        bufs: c
            .bufs
            .iter()
            .map(|b| Buf {
                dtype: b.dtype,
                init: b.init.iter().map(|&v| flush(b.dtype, v)).collect(),
                output: b.output,
            })
            .collect(),
        n: c.n,
        grid: c.grid,
        rule: c.rule,
        known: Vec::new(),
    };
    if let Ok(outs) = run_on(cpu, &flushed_case, kernel) {
        candidates.push(flush_outputs(&outs));
    }
    Some(candidates)
}

fn is_unsupported(e: &Error) -> bool {
    let text = e.to_string();
    matches!(e, Error::Codegen { .. } | Error::Lower(_) | Error::Device { .. })
        && (text.contains("not supported")
            || text.contains("unsupported")
            || text.contains("no storage type")
            || text.contains("does not support"))
}

fn same(a: V, b: V) -> bool {
    match (a, b) {
        (V::F(x), V::F(y)) => (x.is_nan() && y.is_nan()) || x.to_bits() == y.to_bits(),
        _ => a == b,
    }
}

fn describe(c: &Case, i: usize, want: V, got: V) -> String {
    let inputs: Vec<String> = c
        .bufs
        .iter()
        .filter(|b| !b.output)
        .map(|b| b.init.get(i).map_or("-".into(), |v| v.to_string()))
        .collect();
    format!("element {i}: input ({}) expected {want}, got {got}", inputs.join(", "))
}

/// Excused elements of one comparison: the first one's description and how many.
#[derive(Default)]
struct Excused {
    first: Option<String>,
    count: usize,
}

impl Excused {
    /// Element `i` missed the reference: whether the Vulkan specification allows it
    /// ([`vulkan_allowances`], Vulkan devices only). `false`: the element fails.
    #[allow(clippy::too_many_arguments)] // one element's whole context, passed through
    fn allows(&mut self, c: &Case, backend: Backend, op: &str, t: ScalarType, i: usize, want: V, got: V) -> bool {
        if backend != Backend::Vulkan {
            return false;
        }
        let inputs: Vec<V> = c
            .bufs
            .iter()
            .filter(|b| !b.output)
            .filter_map(|b| b.init.get(i).copied())
            .collect();
        match vulkan_allowances::element(op, t, &inputs, got) {
            None => false,
            Some(vulkan_allowances::Allowance::Accepted) => true,
            Some(vulkan_allowances::Allowance::Known(reason)) => {
                self.count += 1;
                self.first
                    .get_or_insert_with(|| format!("{reason}: {}", describe(c, i, want, got)));
                true
            }
        }
    }

    /// `Ok(None)`: pass; `Ok(Some(message))`: KNOWN (elements excused, none failed).
    fn verdict(self) -> Result<Option<String>, String> {
        Ok(self.first.map(|m| match self.count {
            1 => m,
            n => format!("{m} (and {} more such elements)", n - 1),
        }))
    }
}

/// Compares a device's outputs with the reference: `Ok(None)` if they conform, `Ok(Some(m))`
/// if they conform except for elements whose result the Vulkan specification leaves
/// undefined (KNOWN), `Err(m)` on the first element that does not conform.
fn compare(c: &Case, backend: Backend, want: &[Vec<V>], got: &[Vec<V>]) -> Result<Option<String>, String> {
    let t = c.bufs.iter().rfind(|b| b.output).map_or(c.dtype, |b| b.dtype);
    let mut excused = Excused::default();
    match c.rule {
        Rule::Exact => {
            for (w, g) in want.iter().zip(got) {
                for i in 0..w.len() {
                    if !same(w[i], g[i]) && !excused.allows(c, backend, &c.op, t, i, w[i], g[i]) {
                        return Err(describe(c, i, w[i], g[i]));
                    }
                }
            }
            excused.verdict()
        }
        Rule::Float { op, arg } => {
            let bound = bound_for(op, t, backend);
            let x = &c.bufs[arg].init;
            let (w, g) = (&want[0], &got[0]);
            for i in 0..w.len() {
                if !within(t, backend, bound, x[i].f(), w[i].f(), g[i].f())
                    && !excused.allows(c, backend, op, t, i, w[i], g[i])
                {
                    return Err(format!("{} (bound {bound:?})", describe(c, i, w[i], g[i])));
                }
            }
            excused.verdict()
        }
        Rule::Sum { rows, n, axis0 } => {
            let x = &c.bufs[0].init;
            let (w, g) = (&want[0], &got[0]);
            for (j, (wj, gj)) in w.iter().zip(g).enumerate() {
                let elems: Vec<f64> = if axis0 {
                    (0..rows).map(|r| x[r * n + j].f()).collect()
                } else {
                    (0..n).map(|k| x[j * n + k].f()).collect()
                };
                let abs: f64 = elems.iter().map(|v| v.abs()).sum();
                let eps = ulp(t, 1.0);
                let tol = elems.len() as f64 * eps * abs;
                let (wv, gv) = (wj.f(), gj.f());
                let ok = (wv.is_nan() && gv.is_nan()) || wv == gv || (gv - wv).abs() <= tol;
                if !ok {
                    return Err(format!("output {j}: expected {wj}, got {gj} (tolerance {tol:e})"));
                }
            }
            Ok(None)
        }
        Rule::Atomic { op } => {
            let (wm, gm, gold) = (&want[0], &got[0], &got[1]);
            let vals = &c.bufs[1].init;
            let init = &c.bufs[0].init;
            for a in 0..wm.len() {
                let ok = if op == "atomic_add" && t.is_float() {
                    let abs: f64 =
                        init[a].f().abs() + vals.iter().skip(a).step_by(wm.len()).map(|v| v.f().abs()).sum::<f64>();
                    (gm[a].f() - wm[a].f()).abs() <= vals.len() as f64 * ulp(t, 1.0) * abs
                } else if op == "atomic_xchg" || op == "atomic_cas" {
                    true // checked below
                } else {
                    same(wm[a], gm[a])
                };
                if !ok {
                    return Err(format!("address {a}: final value expected {}, got {}", wm[a], gm[a]));
                }
            }
            let lanes = |a: usize| (0..vals.len()).filter(move |i| i % wm.len() == a);
            if op == "atomic_xchg" {
                // Per address: the old values and the final value are the initial value and
                // the values written, in some order.
                for a in 0..wm.len() {
                    let mut seen: Vec<V> = lanes(a).map(|i| gold[i]).chain([gm[a]]).collect();
                    let mut expect: Vec<V> = lanes(a).map(|i| vals[i]).chain([init[a]]).collect();
                    let key = |v: &V| v.f().to_bits();
                    seen.sort_by_key(key);
                    expect.sort_by_key(key);
                    if seen.iter().zip(&expect).any(|(s, e)| !same(*s, *e)) {
                        return Err(format!("address {a}: old and final values are not a permutation of the values written and the initial value"));
                    }
                }
            }
            if op == "atomic_cas" {
                // Per address: exactly one lane saw 0 and wrote its value; every other lane
                // saw that value.
                for (a, &final_value) in gm.iter().enumerate().take(wm.len()) {
                    let winners: Vec<usize> = lanes(a).filter(|&i| gold[i].f() == 0.0).collect();
                    if lanes(a).next().is_none() {
                        continue;
                    }
                    if winners.len() != 1
                        || !same(final_value, vals[winners[0]])
                        || lanes(a).any(|i| i != winners[0] && !same(gold[i], final_value))
                    {
                        return Err(format!(
                            "address {a}: compare-and-swap results are inconsistent (winners {winners:?}, final {})",
                            gm[a]
                        ));
                    }
                }
            }
            Ok(None)
        }
    }
}

/// The outcome of a case whose device outputs are `got` and reference outputs `want`.
fn judge(cpu: &CpuDevice, c: &Case, kernel: &Kernel, backend: Backend, want: &[Vec<V>], got: &[Vec<V>]) -> Outcome {
    let mut checked = compare(c, backend, want, got);
    if backend == Backend::Vulkan && checked != Ok(None) {
        // Vulkan may flush f16/f32 subnormals to zero (SPIR-V without the DenormPreserve
        // mode; NVIDIA's driver does, lavapipe does not): a result computed with flushed
        // inputs and outputs also conforms.
        if let Some(ftz) = flushed_reference(cpu, c, kernel, want) {
            // Element by element: the flushed result where the device gave exactly that,
            // the exact one elsewhere.
            let merged: Vec<Vec<V>> = want
                .iter()
                .enumerate()
                .map(|(o, w)| {
                    w.iter()
                        .enumerate()
                        .map(|(i, &x)| {
                            let g = got[o].get(i).copied();
                            ftz.iter()
                                .map(|f| f[o][i])
                                .find(|&f| g.is_some_and(|g| same(f, g)))
                                .unwrap_or(x)
                        })
                        .collect()
                })
                .collect();
            // The better of the two; on failure the merged comparison's message, which
            // names an element that flushing does not explain.
            let rank = |r: &Result<Option<String>, String>| match r {
                Ok(None) => 0,
                Ok(Some(_)) => 1,
                Err(_) => 2,
            };
            let flushed = compare(c, backend, &merged, got);
            if rank(&flushed) <= rank(&checked) {
                checked = flushed;
            }
        }
    }
    match checked {
        Ok(None) => Outcome::Pass,
        Ok(Some(m)) => Outcome::Known(m),
        Err(m) => match c.known.iter().find(|k| k.0 == backend) {
            Some(k) => Outcome::Known(format!("{}: {m}", k.1)),
            None => Outcome::Fail(m),
        },
    }
}

/// Judges one element as the matrix does, for tests of the classification (e.g. against
/// results seen on a GPU): the element-wise case `op` on `dtype` with one element, inputs
/// `inputs` (exact values of the type), run on the interpreter for the reference, and `got`
/// taken as the output of a device of `backend`. Returns the reference and the outcome.
pub fn classify_element(backend: Backend, op: &str, dtype: ScalarType, inputs: &[f64], got: f64) -> (f64, Outcome) {
    let mut c = cases()
        .into_iter()
        .find(|c| c.op == op && c.dtype == dtype && c.shape == "1")
        .unwrap_or_else(|| panic!("no element-wise case {op} {}", dtype.name()));
    let kernel = c
        .kernel
        .clone()
        .unwrap_or_else(|e| panic!("{op} {}: {e}", dtype.name()));
    let ins: Vec<&mut Buf> = c.bufs.iter_mut().filter(|b| !b.output).collect();
    assert_eq!(ins.len(), inputs.len(), "{op} takes {} inputs", ins.len());
    for (b, &x) in ins.into_iter().zip(inputs) {
        let v = quantize(b.dtype, V::F(x));
        assert!(same(v, V::F(x)), "{x:e} is not a {} value", b.dtype.name());
        b.init = vec![v];
    }
    let cpu = CpuDevice::new();
    let want = run_on(&cpu, &c, &kernel).expect("the interpreter runs the case");
    let outcome = judge(&cpu, &c, &kernel, backend, &want, &[vec![V::F(got)]]);
    (want[0][0].f(), outcome)
}

/// The outcomes of one device.
pub struct DeviceResults {
    pub id: String,
    pub outcomes: Vec<Outcome>,
}

/// Every case on every device.
pub struct Matrix {
    pub cases: Vec<Case>,
    pub devices: Vec<DeviceResults>,
}

/// Runs every case on the interpreter (the reference) and on each device of `devices`; the
/// interpreter is also checked against itself (which exercises the atomics' checks).
pub fn run_matrix(devices: &[Arc<dyn Device>]) -> Matrix {
    let cases = cases();
    let cpu = CpuDevice::new();
    let reference: Vec<Option<rutile::Result<Vec<Vec<V>>>>> = cases
        .iter()
        .map(|c| c.kernel.as_ref().ok().map(|k| run_on(&cpu, c, k)))
        .collect();
    let mut all: Vec<(String, &dyn Device)> = vec![("cpu (interpreter)".into(), &cpu)];
    for d in devices {
        all.push((d.id(), d.as_ref()));
    }
    let mut results = Vec::new();
    for (id, d) in all {
        let props = d.properties();
        let backend = props.backend;
        let mut outcomes = Vec::new();
        for (c, r) in cases.iter().zip(&reference) {
            let (Ok(kernel), Some(r)) = (&c.kernel, r) else {
                outcomes.push(Outcome::Unsupported("not accepted by the builder".into()));
                continue;
            };
            let missing: Vec<&str> = c
                .bufs
                .iter()
                .map(|b| b.dtype)
                .filter(|t| !props.supported_types.contains(t))
                .map(|t| t.name())
                .collect();
            let outcome = if !missing.is_empty() {
                Outcome::Unsupported(format!("the device does not support {}", missing.join(", ")))
            } else {
                match (r, run_on(d, c, kernel)) {
                    (Err(e), _) => Outcome::Fail(format!("the interpreter failed: {e}")),
                    (_, Err(e)) if is_unsupported(&e) => Outcome::Unsupported(e.to_string()),
                    (_, Err(e)) => Outcome::Fail(format!("error: {e}")),
                    (Ok(want), Ok(got)) => judge(&cpu, c, kernel, backend, want, &got),
                }
            };
            outcomes.push(outcome);
        }
        results.push(DeviceResults { id, outcomes });
    }
    Matrix {
        cases,
        devices: results,
    }
}

#[derive(Default, Clone, Copy)]
struct Counts {
    pass: usize,
    fail: usize,
    unsupported: usize,
    known: usize,
}

impl Counts {
    fn add(&mut self, o: &Outcome) {
        match o {
            Outcome::Pass => self.pass += 1,
            Outcome::Fail(_) => self.fail += 1,
            Outcome::Unsupported(_) => self.unsupported += 1,
            Outcome::Known(_) => self.known += 1,
        }
    }
    fn cell(&self) -> String {
        if self.pass + self.fail + self.unsupported + self.known == 0 {
            return ".".into();
        }
        let mut s = String::new();
        if self.fail > 0 {
            write!(s, "F{}", self.fail).unwrap();
        }
        if self.known > 0 {
            write!(s, "K{}", self.known).unwrap();
        }
        if self.pass > 0 {
            write!(s, "{}{}", if s.is_empty() { "" } else { "+" }, self.pass).unwrap();
        }
        if self.unsupported > 0 {
            write!(s, "{}U{}", if s.is_empty() { "" } else { "+" }, self.unsupported).unwrap();
        }
        s
    }
}

impl Matrix {
    /// The number of failures over all devices.
    pub fn failures(&self) -> usize {
        self.devices
            .iter()
            .flat_map(|d| &d.outcomes)
            .filter(|o| matches!(o, Outcome::Fail(_)))
            .count()
    }

    /// The matrix as text: per device, a table op × dtype (each cell: `F` failures, `K`
    /// known mismatches, passes, `U` unsupported; `-` where the builder rejects the type),
    /// the totals, then every failure, known mismatch and unsupported combination.
    pub fn report(&self) -> String {
        let mut s = String::new();
        let mut rows: Vec<&str> = Vec::new();
        for c in &self.cases {
            if !rows.contains(&c.op.as_str()) {
                rows.push(&c.op);
            }
        }
        let rejected = |i: usize| self.cases[i].kernel.is_err();
        for d in &self.devices {
            writeln!(
                s,
                "\n== {} ==  (cells: F=fail K=known, passes, U=unsupported; - = type not accepted by the op)",
                d.id
            )
            .unwrap();
            write!(s, "{:<20}", "op").unwrap();
            for t in DTYPES {
                write!(s, "{:>8}", t.name()).unwrap();
            }
            writeln!(s).unwrap();
            let mut total = Counts::default();
            let mut not_accepted = 0;
            for row in &rows {
                write!(s, "{row:<20}").unwrap();
                for t in DTYPES {
                    let mut cnt = Counts::default();
                    let mut any = false;
                    let mut all_rejected = true;
                    for (i, c) in self.cases.iter().enumerate() {
                        if c.op == *row && c.dtype == t {
                            any = true;
                            if rejected(i) {
                                not_accepted += 1;
                            } else {
                                all_rejected = false;
                                cnt.add(&d.outcomes[i]);
                            }
                        }
                    }
                    let cell = if !any {
                        "".into()
                    } else if all_rejected {
                        "-".into()
                    } else {
                        cnt.cell()
                    };
                    write!(s, "{cell:>8}").unwrap();
                    for (i, c) in self.cases.iter().enumerate() {
                        if c.op == *row && c.dtype == t && !rejected(i) {
                            total.add(&d.outcomes[i]);
                        }
                    }
                }
                writeln!(s).unwrap();
            }
            writeln!(
                s,
                "{}: {} pass, {} FAIL, {} unsupported, {} known; {} op/type combinations not accepted by the builder",
                d.id, total.pass, total.fail, total.unsupported, total.known, not_accepted
            )
            .unwrap();
        }
        for d in &self.devices {
            let mut unsupported: BTreeMap<String, Vec<String>> = BTreeMap::new();
            for (c, o) in self.cases.iter().zip(&d.outcomes) {
                match o {
                    Outcome::Fail(m) => {
                        writeln!(s, "FAIL  {} {} {} [{}]: {m}", d.id, c.op, c.dtype.name(), c.shape).unwrap()
                    }
                    Outcome::Known(m) => {
                        writeln!(s, "KNOWN {} {} {} [{}]: {m}", d.id, c.op, c.dtype.name(), c.shape).unwrap()
                    }
                    Outcome::Unsupported(m) if c.kernel.is_ok() => {
                        let m: String = m.chars().take(160).collect();
                        let e = unsupported.entry(m).or_default();
                        let key = format!("{}:{}", c.op, c.dtype.name());
                        if !e.contains(&key) {
                            e.push(key);
                        }
                    }
                    _ => {}
                }
            }
            for (m, which) in unsupported {
                writeln!(
                    s,
                    "UNSUPPORTED {} ({} op/types): {m}\n    {}",
                    d.id,
                    which.len(),
                    which.join(" ")
                )
                .unwrap();
            }
        }
        s
    }
}
