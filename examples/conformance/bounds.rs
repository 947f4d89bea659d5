//! Bounds: how far a device may be from the interpreter, per op, type and backend.

use super::*;

/// A documented error bound of a float op on one backend: `ulp + ulp_per_x·|x|` ulps of the
/// result, or an absolute `abs` (for `x` within `abs_in`), whichever is larger.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct Bound {
    pub ulp: f64,
    pub ulp_per_x: f64,
    pub abs: f64,
    pub abs_in: (f64, f64),
}

pub(super) const fn ulps(ulp: f64) -> Bound {
    Bound {
        ulp,
        ulp_per_x: 0.0,
        abs: 0.0,
        abs_in: (0.0, 0.0),
    }
}
/// The Vulkan specification's bound of `log` and `log2`: 3 ulp, and an absolute 2^-21
/// inside [0.5, 2].
pub(super) const VULKAN_LOG: Bound = Bound {
    ulp: 3.0,
    ulp_per_x: 0.0,
    abs: 4.77e-7,
    abs_in: (0.5, 2.0),
};
/// An absolute error bound `abs` for inputs in [-π, π] (sin and cos), and none outside.
/// The Bessel functions' bounds (see their rows).
const JY_CUDA: Bound = Bound {
    ulp: 2.0,
    ulp_per_x: 0.0,
    abs: 2.384185791015625e-7,
    abs_in: (f64::NEG_INFINITY, f64::INFINITY),
};
const JY_VULKAN: Bound = Bound {
    ulp: 8.0,
    ulp_per_x: 0.0,
    abs: 9.5367431640625e-7,
    abs_in: (f64::NEG_INFINITY, f64::INFINITY),
};
const JN5_VULKAN: Bound = Bound { ulp: 18.0, ..JY_VULKAN };
/// f64's `j0` ... `yn` through Vulkan ([`F64_FUNCTIONS`]): 8 ulp, or 2^-50 absolute.
const JY_F64_VULKAN: Bound = Bound {
    ulp: 8.0,
    ulp_per_x: 0.0,
    abs: 8.881784197001252e-16,
    abs_in: (f64::NEG_INFINITY, f64::INFINITY),
};
const JN5_F64_VULKAN: Bound = Bound {
    ulp: 16.0,
    ..JY_F64_VULKAN
};
pub(super) const fn within_pi(abs: f64) -> Bound {
    Bound {
        ulp: 0.0,
        ulp_per_x: 0.0,
        abs,
        abs_in: (-PI_AND_A_BIT, PI_AND_A_BIT),
    }
}
/// Just above π, so that ±π are inside the ranges where sin/cos bounds hold.
pub(super) const PI_AND_A_BIT: f64 = std::f64::consts::PI + 1e-5;

pub(super) const EXACT: Bound = ulps(0.0);

/// The documented accuracy of the float ops that are not exact, per backend:
/// `(op, PTX, SPIR-V/Vulkan)`.
///
/// * PTX: the table "Accuracy" in `backend-ptx/src/math.rs` (f32; f16 and bf16 compute in
///   f32 and round once; f64's transcendentals are built from ops, [`F64_FUNCTIONS`]).
///   `sqrt`, `div`, `fma`, `rem` are exact.
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
///   `exp` bound plus the division's. `f64`'s transcendentals are built from ops
///   ([`F64_FUNCTIONS`]); its `sqrt`, `rsqrt` and `div` are held to these bounds in f32 ulps.
pub const FLOAT_BOUNDS: &[(&str, Bound, Bound)] = &[
    ("add", EXACT, EXACT),
    ("sub", EXACT, EXACT),
    ("mul", EXACT, EXACT),
    ("div", EXACT, ulps(2.5)),
    // `div.full.f32` on CUDA (PTX ISA: "maximum ulp error is 2 across the full range");
    // Vulkan divides as `div`.
    ("div_full", ulps(2.0), ulps(2.5)),
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
        VULKAN_LOG,
    ),
    (
        "log2",
        Bound {
            ulp: 2.2,
            ulp_per_x: 0.0,
            abs: 2.1e-7,
            abs_in: (0.5, 1.5),
        },
        VULKAN_LOG,
    ),
    ("rsqrt", ulps(1.5), ulps(2.0)),
    ("sin", within_pi(4e-7), within_pi(4.9e-4)),
    ("cos", within_pi(4e-7), within_pi(4.9e-4)),
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
    // `asin`, `acos`, `atan`, `atan2`: compositions (builder/inverse_trig.rs) that the
    // interpreter computes alike; through CUDA their divisions and square roots are correctly
    // rounded (1 ulp for any contraction), through Vulkan the device's (`sqrt` 3 ulp,
    // division 2.5 ulp), which the reductions carry into the result: 8 ulp.
    ("asin", ulps(1.0), ulps(8.0)),
    ("acos", ulps(1.0), ulps(8.0)),
    ("atan", ulps(1.0), ulps(8.0)),
    ("atan2", ulps(1.0), ulps(8.0)),
    // `tan` (builder/tan.rs): an exact reduction in integers, a polynomial and, an odd
    // multiple of π/2 away, `-1 / t`; through CUDA correctly rounded ops as the
    // interpreter's, a contraction in the polynomial carried through the division (2 ulp);
    // through Vulkan the device's division (2.5 ulp): 8 ulp.
    ("tan", ulps(2.0), ulps(8.0)),
    // `sin_precise`, `cos_precise` (builder/sincos.rs): the same exact reduction and
    // polynomials whose multiply-adds a device may contract or not.
    ("sin_precise", ulps(2.0), ulps(8.0)),
    ("cos_precise", ulps(2.0), ulps(8.0)),
    // `sinpi`, `cospi` (builder/sinpi.rs): an exact reduction and a polynomial whose
    // multiply-adds a device may contract or not: 1 ulp through CUDA, 8 through Vulkan.
    ("sinpi", ulps(1.0), ulps(8.0)),
    ("cospi", ulps(1.0), ulps(8.0)),
    // `erfinv` (builder/erfinv.rs): a logarithm, a square root and polynomials; the
    // device's `log` (through CUDA `lg2.approx` and a product, through Vulkan 3 ulp or 2^-21
    // absolute near 1) moves `w`, which the polynomials damp: 4 and 8 ulp.
    ("erfinv", ulps(4.0), ulps(8.0)),
    // `erfc` (builder/erfc.rs): a division for `t`, which the exponent's polynomial
    // amplifies, and exp_log.rs's exponentials; through CUDA correctly rounded ops as the
    // interpreter's (2 ulp for contractions), through Vulkan the device's division (2.5
    // ulp, amplified): 16 ulp.
    ("erfc", ulps(2.0), ulps(16.0)),
    // `erfcx` (builder/erfc.rs): the same fit, division and exponentials as `erfc`.
    ("erfcx", ulps(2.0), ulps(16.0)),
    // `lgamma`, `tgamma` (builder/gamma.rs): polynomials, exp_log.rs's logarithm and
    // exponential, `sinpi` (lgamma's reflection) and a division or two; through Vulkan the
    // device's divisions (2.5 ulp), which the logarithm and the products carry: 16 ulp.
    ("lgamma", ulps(2.0), ulps(16.0)),
    ("tgamma", ulps(2.0), ulps(16.0)),
    // `normcdf`, `erfcinv`, `normcdfinv` (builder/normal.rs): erfc.rs's fit, exp_log.rs's
    // logarithm and exponential, Newton steps with a division each; as `erfc`.
    ("normcdf", ulps(2.0), ulps(16.0)),
    ("erfcinv", ulps(2.0), ulps(16.0)),
    ("normcdfinv", ulps(2.0), ulps(16.0)),
    // `cyl_bessel_i0`, `cyl_bessel_i1` (builder/bessel.rs): polynomials, exp_log.rs's
    // exponential, a square root and a division (Vulkan's: 3 and 2.5 ulp).
    ("cyl_bessel_i0", ulps(2.0), ulps(16.0)),
    ("cyl_bessel_i1", ulps(2.0), ulps(16.0)),
    // `j0`, `j1`, `y0`, `y1` (builder/bessel_jy.rs): absolute errors next to their zeros,
    // from the polynomials' multiply-adds (contracted or not), a division and a square root
    // (Vulkan's: 2.5 and 3 ulp of values up to 1): 2 ulp or 2^-22 absolute through CUDA, 8
    // ulp or 2^-20 through Vulkan (the arguments' envelope is at most 1 from 2 on).
    // `rcbrt`, `rhypot`, `norm3d`, `norm4d`, `rnorm3d`, `rnorm4d` (builder/roots.rs): a
    // scaling by a power of two, multiply-adds, a square root and a division (Vulkan's: 3 and
    // 2.5 ulp).
    ("rcbrt", ulps(2.0), ulps(8.0)),
    ("rhypot", ulps(2.0), ulps(8.0)),
    ("norm3d", ulps(2.0), ulps(8.0)),
    ("norm4d", ulps(2.0), ulps(8.0)),
    ("rnorm3d", ulps(2.0), ulps(8.0)),
    ("rnorm4d", ulps(2.0), ulps(8.0)),
    ("j0", JY_CUDA, JY_VULKAN),
    ("j1", JY_CUDA, JY_VULKAN),
    ("y0", JY_CUDA, JY_VULKAN),
    ("y1", JY_CUDA, JY_VULKAN),
    // `jn`, `yn` (builder/bessel_n.rs): the recurrence from orders 0 and 1, each of its
    // steps a product by 2k/x, whose division is Vulkan's (2.5 ulp): at order 5 four such
    // steps past `j1`'s and `y1`'s own 8, 18 ulp (the H200's Vulkan driver came to 12).
    ("jn(5)", JY_CUDA, JN5_VULKAN),
    ("yn(5)", JY_CUDA, JN5_VULKAN),
    // libdevice's `expm1` ... `atanh`: compositions (builder/exp_log.rs) of multiply-adds,
    // one or two divisions and `sqrt` (`asinh`, `acosh`), which the interpreter computes alike;
    // through CUDA every op is correctly rounded as the interpreter's, through Vulkan the
    // device's division (2.5 ulp) and `sqrt` (3 ulp), which the reductions damp: 8 ulp.
    ("expm1", ulps(1.0), ulps(8.0)),
    ("log1p", ulps(1.0), ulps(8.0)),
    ("exp10", ulps(1.0), ulps(8.0)),
    ("log10", ulps(1.0), ulps(8.0)),
    ("sinh", ulps(1.0), ulps(8.0)),
    ("cosh", ulps(1.0), ulps(8.0)),
    ("asinh", ulps(1.0), ulps(8.0)),
    ("acosh", ulps(1.0), ulps(8.0)),
    ("atanh", ulps(1.0), ulps(8.0)),
    // libdevice's `hypot` and `cbrt` (builder/roots.rs): a fused multiply-add and `sqrt`
    // between exact scalings, and Newton's iteration from the bits; through CUDA every op is
    // correctly rounded as the interpreter's, through Vulkan the device's `sqrt` (3 ulp) and
    // division (2.5 ulp, which the last step's correction damps): 8 ulp.
    ("hypot", ulps(1.0), ulps(8.0)),
    ("cbrt", ulps(1.0), ulps(8.0)),
    // `softmax` along a lane of at most 256 elements (the rows' inputs in [-4, 4]): the
    // exponential of `x - max` (|x - max| <= 8: at most 19 ulp through Vulkan), a sum of up to
    // 256 positive terms (each addition 1/2 ulp of the partial sum) and a division (2.5 ulp
    // at most): 300 ulp covers both backends, where a wrong lane or axis is off by far more.
    ("softmax", ulps(300.0), ulps(300.0)),
    // Both backends: the series below 0.55 (within 2 ulp), above it `1 - 2 / (e^(2|x|) + 1)`:
    // the exponential's error (at `2|x|`) plus three roundings, the subtraction shrinking it.
    (
        "tanh",
        ulps(4.0),
        Bound {
            ulp: 7.0,
            ulp_per_x: 4.0,
            abs: 0.0,
            abs_in: (0.0, 0.0),
        },
    ),
    // `2^(y·log2|x|)` with `|log2 x| ≤ 2` (the cases' bases), `x` of the bound being `y`:
    // the logarithm's error scaled by `|y|` and the exponential's at `|t| ≤ 2|y|`
    // (PTX: `lg2.approx` within 2^-22 absolute, `ex2.approx` 2 ulp; Vulkan: `log2` 3 ulp or
    // 2^-21 absolute, `exp2` 3 + 2·|t| ulp).
    (
        "pow",
        Bound {
            ulp: 3.0,
            ulp_per_x: 5.0,
            abs: 0.0,
            abs_in: (0.0, 0.0),
        },
        Bound {
            ulp: 4.0,
            ulp_per_x: 14.0,
            abs: 0.0,
            abs_in: (0.0, 0.0),
        },
    ),
    // (The rounding of `t` adds up to 1.4·|y| ulp on both.)
    // `sqrt(-2 log u1) · cos(2π u2)` with `u1 ≥ 1e-7` (so the radius is below 5.7): an absolute
    // error, whatever the offset (`x`), of the radius times the cosine's error plus the
    // logarithm's share (PTX: `cos.approx` about 1e-6 absolute on [0, 2π]; Vulkan: `cos`
    // 2^-11 absolute, which the specification promises on [-π, π] only, taken as holding on
    // [0, 2π] too). Where `u1` is within about 1e-6 of 1 (a chance of 1e-6 per element),
    // the logarithm's absolute error dominates the tiny radius and the bound does not hold.
    (
        "randn",
        Bound {
            ulp: 2.0,
            ulp_per_x: 0.0,
            abs: 3e-5,
            abs_in: (f64::NEG_INFINITY, f64::INFINITY),
        },
        Bound {
            ulp: 2.0,
            ulp_per_x: 0.0,
            abs: 4e-3,
            abs_in: (f64::NEG_INFINITY, f64::INFINITY),
        },
    ),
];

/// f64's `exp10` through Vulkan: `2^(x·log2 10)` with the product in two parts, whose
/// second part is a fused multiply-add's rounding error: where `fma` rounds twice (lavapipe)
/// it is lost, and the result is off by up to half an ulp of the product `p` times `ln 2`,
/// relative: at most `2·ln 2·|p|` ulp, `4.6·|x|` (7 ulp at x = -5 and 17 at x = 30 on
/// lavapipe).
const EXP10_VULKAN: Bound = Bound {
    ulp: 2.0,
    ulp_per_x: 4.7,
    abs: 0.0,
    abs_in: (0.0, 0.0),
};

/// f64 `tgamma`'s bound through Vulkan: `e^lgamma(x)`, `lgamma` in two parts whose second
/// parts are fused multiply-adds' rounding errors. Where `fma` rounds twice (lavapipe) they
/// are lost, and `lgamma` is off by about an ulp of its larger terms, which the exponential
/// turns into a relative error: up to 2.4 ulp per unit of `|lgamma(x)|` on lavapipe (135 ulp
/// at x = -42.1, 31 at -3.7e-15, 1027 at -171). Over the cases' range ([-43, 36], from
/// 2^-20 up, where `|lgamma(x)|` is below 14 under 1 and below 3·|x| above but next to the
/// poles) that is within 64 ulp and 4 per unit of `|x|`. Where `fma` is fused (PTX, and
/// Vulkan drivers that fuse it) the result is the interpreter's.
const TGAMMA_VULKAN: Bound = Bound {
    ulp: 64.0,
    ulp_per_x: 4.0,
    abs: 0.0,
    abs_in: (0.0, 0.0),
};

/// f64's functions that the builder writes out in f64 ops (`core-ir/src/builder/f64_*.rs`):
/// every backend runs the interpreter's ops, so their bounds are in f64 ulps, `(op, PTX,
/// SPIR-V/Vulkan)`. PTX rounds each op as the interpreter does and fuses its `fma`s: the
/// same bits (as the H200 computed), but for the inverses of the normal family (below). Through Vulkan, f64 arithmetic is marked
/// `NoContraction` (without it NVIDIA's driver rearranged the functions' two-part sums),
/// but a device may still round an `fma` twice (the second parts of `sin`, `cos`, `erf` and
/// `pow` then lose their rounding errors) and divide within ulps of the quotient rather
/// than to it (the functions correct each quotient by its residual): on lavapipe, which
/// rounds `fma` twice, the cases differed from the interpreter by up to 2 ulp (`log2`,
/// `tan`, `asin`, `acos`, `atan2`, `rcbrt`, `rhypot`, `rnorm4d`, `erfc`, `normcdf`) and 3
/// (`pow`), by 1 for the others (`EXP10_VULKAN` for `exp10`). The Vulkan bounds leave an
/// ulp more.
pub const F64_FUNCTIONS: &[(&str, Bound, Bound)] = &[
    ("exp", EXACT, ulps(2.0)),
    ("exp2", EXACT, ulps(2.0)),
    ("log", EXACT, ulps(2.0)),
    ("log2", EXACT, ulps(3.0)),
    ("sin", EXACT, ulps(2.0)),
    ("cos", EXACT, ulps(2.0)),
    ("sin_precise", EXACT, ulps(2.0)),
    ("cos_precise", EXACT, ulps(2.0)),
    ("erf", EXACT, ulps(2.0)),
    ("sigmoid", EXACT, ulps(2.0)),
    ("tanh", EXACT, ulps(2.0)),
    ("pow", EXACT, ulps(4.0)),
    ("pow(wide)", EXACT, ulps(4.0)),
    ("expm1", EXACT, ulps(2.0)),
    ("log1p", EXACT, ulps(2.0)),
    ("exp10", EXACT, EXP10_VULKAN),
    ("log10", EXACT, ulps(2.0)),
    ("sinh", EXACT, ulps(2.0)),
    ("cosh", EXACT, ulps(2.0)),
    ("asinh", EXACT, ulps(2.0)),
    ("acosh", EXACT, ulps(2.0)),
    ("atanh", EXACT, ulps(2.0)),
    ("tan", EXACT, ulps(3.0)),
    ("atan", EXACT, ulps(2.0)),
    ("asin", EXACT, ulps(3.0)),
    ("acos", EXACT, ulps(3.0)),
    ("atan2", EXACT, ulps(3.0)),
    ("hypot", EXACT, ulps(2.0)),
    ("rhypot", EXACT, ulps(3.0)),
    ("norm3d", EXACT, ulps(2.0)),
    ("norm4d", EXACT, ulps(2.0)),
    ("rnorm3d", EXACT, ulps(2.0)),
    ("rnorm4d", EXACT, ulps(3.0)),
    ("cbrt", EXACT, ulps(2.0)),
    ("rcbrt", EXACT, ulps(3.0)),
    ("erfc", EXACT, ulps(3.0)),
    ("sinpi", EXACT, ulps(2.0)),
    ("cospi", EXACT, ulps(2.0)),
    ("erfcx", EXACT, ulps(2.0)),
    ("normcdf", EXACT, ulps(3.0)),
    // lavapipe differed by up to 3 ulp (`lgamma` over [-2, 100], where it has no root).
    ("lgamma", EXACT, ulps(4.0)),
    ("tgamma", EXACT, TGAMMA_VULKAN),
    // Newton's steps from the f32 functions' results, which PTX computes within an ulp of
    // the interpreter's: the last step's rounding may differ by one (seen on the H200).
    ("erfinv", ulps(1.0), ulps(2.0)),
    ("erfcinv", ulps(1.0), ulps(2.0)),
    ("normcdfinv", ulps(1.0), ulps(2.0)),
    // The Bessel functions (f64_bessel_*.rs): through Vulkan a double-rounded `fma` loses
    // the corrections that take back `x²/4`'s rounding (a few ulp near the series' ends)
    // and `2/x`'s (half an ulp a step of jn's and yn's recurrences); next to the zeros of
    // `j0` ... `yn` the error is absolute, of the envelope (at most 1).
    ("j0", EXACT, JY_F64_VULKAN),
    ("j1", EXACT, JY_F64_VULKAN),
    ("y0", EXACT, JY_F64_VULKAN),
    ("y1", EXACT, JY_F64_VULKAN),
    ("jn(5)", EXACT, JN5_F64_VULKAN),
    ("yn(5)", EXACT, JN5_F64_VULKAN),
    ("cyl_bessel_i0", EXACT, ulps(8.0)),
    ("cyl_bessel_i1", EXACT, ulps(8.0)),
];

/// The unit of `op`'s bound on element type `t` on `backend`: ulps of `t` (f16 and bf16
/// computed in f32 through CUDA: f32 ulps, plus one of `t`, in [`within`]), except f64's
/// device functions (`sqrt`, `rsqrt`, `div` through Vulkan, whose specification promises
/// them no better than f32), in f32 ulps.
pub(super) fn unit_for(op: &str, t: ScalarType, backend: Backend) -> ScalarType {
    match (t, backend) {
        (F16, Backend::Cuda) | (BF16, _) => F32,
        (t, _) if t.is_fp8() => F32,
        (F64, _) if F64_FUNCTIONS.iter().any(|r| r.0 == op) => F64,
        (F64, _) => F32,
        (t, _) => t,
    }
}

/// The bound of `op` on element type `t` on `backend`: [`FLOAT_BOUNDS`] ([`F64_FUNCTIONS`]
/// for those), except where the Vulkan specification's half-precision column differs
/// ([`vulkan_allowances::bound`]).
pub(super) fn bound_for(op: &str, t: ScalarType, backend: Backend) -> Bound {
    if t == F64 {
        if let Some(r) = F64_FUNCTIONS.iter().find(|r| r.0 == op) {
            return match backend {
                Backend::Interpreter => EXACT,
                Backend::Cuda => r.1,
                _ => r.2,
            };
        }
    }
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
pub(super) mod vulkan_allowances {
    use super::{flush, flushable, same, within_pi, Bound, V};
    use rutile::ScalarType::{self, *};

    /// The verdict on one element that missed the reference.
    #[derive(Clone, Copy, Debug, PartialEq)]
    pub(crate) enum Allowance {
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
    pub(crate) fn bound(op: &str, t: ScalarType) -> Option<Bound> {
        match (op, t) {
            ("sin" | "cos", F16) => Some(within_pi(SIN_COS_F16_ABS)),
            _ => None,
        }
    }

    /// 2^-7, the half-precision absolute bound of `sin()` and `cos()` in [-π, π].
    pub(crate) const SIN_COS_F16_ABS: f64 = 0.0078125;

    pub(crate) const DIV_OUT_OF_RANGE: &str = "Vulkan spec, Precision and Operation of SPIR-V Instructions: \
        OpFDiv(x,y) is 2.5 ULP only for |y| in [2^-126, 2^126] (half: [2^-14, 2^14]), \
        undefined precision outside (divisor zero or subnormal with a dividend that may be flushed to zero, \
        or out of range)";

    /// Whether the Vulkan specification allows `got` for element-wise `op` on `t` with
    /// inputs `inputs`, where `got` missed the reference (and its flushed versions).
    /// `None`: it does not, the element fails.
    pub(crate) fn element(op: &str, t: ScalarType, inputs: &[V], got: V) -> Option<Allowance> {
        match op {
            // "Precision of core SPIR-V Instructions": OpFDiv(x,y) is 2.5 ULP for |y| in
            // [2^-126, 2^126] in single precision, [2^-14, 2^14] in half; outside that
            // range the table gives no precision, i.e. the result is undefined. The same
            // section's rule "Dividing a non-zero by a zero results in the appropriately
            // signed IEEE 754 infinity" still holds for a zero divisor, so a zero divisor
            // is excused only when the dividend is zero, NaN or subnormal (a subnormal may
            // be flushed to zero on input, and 0/0 is not mathematically defined).
            "div" | "div_full" if flushable(t) && inputs.len() == 2 => {
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
            // minimum/maximum (and fmax/fmin, built on them) compare and select: when both
            // operands are subnormal or zero they may compare as two equal zeros, and the
            // select then returns either operand's bits unflushed. Either operand (or its flushed value) is accepted.
            "minimum" | "maximum" | "fmax" | "fmin" if flushable(t) && inputs.len() == 2 => {
                let (a, b) = (inputs[0], inputs[1]);
                let zeros = [a, b].iter().all(|&v| !v.is_nan() && flush(t, v).f() == 0.0);
                let either = [a, b, flush(t, a), flush(t, b)].iter().any(|&v| same(v, got));
                (zeros && either).then_some(Allowance::Accepted)
            }
            // Denormals again: a `remainder` whose exact value is subnormal comes from
            // normal operands by subtractions and compares (builder/float_class.rs), and a
            // driver that flushes the subnormal intermediate gives a zero whose sign is that
            // of the steps after it, where the flushed reference has the exact result's.
            // Either zero is accepted there.
            "remainder" if flushable(t) && inputs.len() == 2 => {
                let want = V::F(remainder(inputs[0].f(), inputs[1].f()));
                let subnormal = want.f() != 0.0 && flush(t, want).f() == 0.0;
                (subnormal && got.f() == 0.0).then_some(Allowance::Accepted)
            }
            _ => None,
        }
    }

    /// IEEE 754's remainder of two f32 or f16 values (exact in f64): what an even quotient
    /// leaves, less `|y|` past half of it or at half after an odd quotient, with `x`'s sign.
    fn remainder(x: f64, y: f64) -> f64 {
        let ay = y.abs();
        let r = x.abs() % (2.0 * ay);
        let odd = r >= ay;
        let r = if odd { r - ay } else { r };
        let r = if 2.0 * r > ay || (2.0 * r == ay && odd) {
            r - ay
        } else {
            r
        };
        if x.is_sign_negative() {
            -r
        } else {
            r
        }
    }
}

/// One unit in the last place of `x` in type `t`.
pub(super) fn ulp(t: ScalarType, x: f64) -> f64 {
    let (mant, min_exp) = match rutile::ir::fp8::format_of(t) {
        Some(f) => (f.mantissa as i32, f.min_exponent()),
        None => match t {
            F16 => (10, -14),
            BF16 => (7, -126),
            F32 => (23, -126),
            _ => (52, -1022),
        },
    };
    let e = if x == 0.0 || !x.is_finite() {
        min_exp
    } else {
        (x.abs().log2().floor() as i32).max(min_exp)
    };
    2f64.powi(e - mant)
}

/// Whether `got` is within `bound` of the reference `want` for argument `x`, the bound in
/// units of `unit` ([`unit_for`]).
pub(super) fn within(t: ScalarType, unit: ScalarType, bound: Bound, x: f64, want: f64, got: f64) -> bool {
    if want.is_nan() || got.is_nan() {
        return want.is_nan() && got.is_nan();
    }
    if want == got {
        return want != 0.0 || bound != EXACT || want.is_sign_negative() == got.is_sign_negative();
    }
    // E5M2's functions compute in f32: where the exact value is past f32's range (exp2 of
    // 128 and more) the f32 one is infinite, which E5M2 keeps, where the exact one saturates.
    if t == F8E5M2 && bound != EXACT && got.is_infinite() && got == want * f64::INFINITY && want.abs() == 57344.0 {
        return true;
    }
    if bound == EXACT || want.is_infinite() || got.is_infinite() {
        return false;
    }
    // Plus one ulp of the type for f16, bf16 and fp8 (computed in f32 and rounded once);
    // Vulkan's f16 precision is in f16 ulps.
    let mut tol = (bound.ulp + bound.ulp_per_x * x.abs()) * ulp(unit, want);
    if matches!(t, F16 | BF16) || t.is_fp8() {
        tol += ulp(t, want);
    }
    if x > bound.abs_in.0 && x < bound.abs_in.1 {
        tol = tol.max(bound.abs);
    }
    (got - want).abs() <= tol
}
