//! Float functions: `exp exp2 log log2 sqrt rsqrt sin cos floor ceil erf sigmoid tanh pow`, `fmod`
//! and NaN-propagating `minimum`/`maximum`.
//!
//! # Accuracy (f32; f16 and bf16 compute in f32 and round once)
//!
//! | op        | PTX                                          | error                          |
//! |-----------|----------------------------------------------|--------------------------------|
//! | `sqrt`    | `sqrt.rn.f32`                                | correctly rounded              |
//! | `floor`   | `cvt.rmi.f32.f32`                            | exact                          |
//! | `ceil`    | `cvt.rpi.f32.f32`                            | exact                          |
//! | `exp2`    | `ex2.approx.ftz.f32`                         | 2 ulp; results below 2^-126 flush to 0 |
//! | `exp`     | `ex2.approx.f32` of `x·log2(e)`, corrected   | 2.3 ulp over the whole range   |
//! | `log2`    | `lg2.approx.f32`                             | 2.2 ulp; 2.1e-7 absolute for x in (0.5, 1.5) |
//! | `log`     | `lg2.approx.f32` × ln 2                      | 3.3 ulp; 1.6e-7 absolute for x in (0.5, 1.5) |
//! | `rsqrt`   | `rsqrt.approx.f32`                           | 1.5 ulp                        |
//! | `sin/cos` | `sin.approx.f32` / `cos.approx.f32`          | 4e-7 absolute for \|x\| ≤ π, growing with \|x\| (no precise range reduction: the builder's `sin_precise`/`cos_precise` have one) |
//! | `erf`     | polynomial / `1 - exp(polynomial)`           | 1.2 ulp                        |
//! | `sigmoid` | `1 / (1 + e^-x)`, as `e^-\|x\| / (1 + e^-\|x\|)` for x < 0 | 3.5 ulp          |
//! | `tanh`    | series below 0.55, else `1 - 2 / (e^(2\|x\|) + 1)` | 4 ulp (bound from the parts, not measured yet) |
//! | `pow`     | `ex2.approx(y · lg2.approx(\|x\|))`, C's special cases | 3 + 5·\|y\| ulp for \|log2 x\| ≤ 2 (from the parts, not measured yet) |
//!
//! (The errors are the largest seen on an H100 over 250 000 arguments spread over ±0.01 to
//! ±100 plus special values, against f64 references; infinities, NaN and zeros give the
//! IEEE results.)
//!
//! These follow Triton's CUDA code generation (`exp` as `ex2.approx` of `x·log2 e`, `exp2` as
//! `ex2.approx.ftz`) and are not correctly rounded, unlike the interpreter, which computes in f64; compare with a
//! tolerance. `exp` splits `x·log2(e)` into the rounded product `t` and its rounding error
//! `δ` (with an `fma`), and returns `2^t · (1 + δ·ln 2)`, which removes the error that the
//! plain product adds for large `|x|` (about `|x|` ulp).
//!
//! `erf` is odd; for `|x| < 0.875` it is `x + x·P(x²)` with a degree-5 polynomial `P`, and
//! above, `1 - exp(Q(|x| - 0.875))` with a degree-8 polynomial `Q` fitted to `ln(erfc)` on
//! `[0.875, 4]` (for `|x| ≥ 4`, erf rounds to ±1 in f32). The coefficients are least-squares
//! Chebyshev fits of those functions, rounded to f32.
//!
//! f64: `sqrt` (`sqrt.rn.f64`), `rsqrt` (`1 / sqrt`, two correctly rounded steps, exactly as
//! the interpreter computes it), `floor`, `ceil`, `abs`, `neg`, `minimum`, `maximum`, `rem`
//! are supported; the transcendental ops (`exp exp2 log log2 sin cos erf sigmoid tanh pow`)
//! have no PTX instructions and return an error. The builder writes all of them out in f64
//! ops (`rutile_ir`'s `builder/f64_*.rs`), so only IR built by other means reaches this.
//!
//! `fmod` is exact for every type: `|a|` is reduced by `|b|·2^k` for decreasing `k`, each
//! subtraction exact (Sterbenz), then the sign of `a` is applied; NaN when `a` is infinite
//! or NaN or `b` is 0 or NaN, `a` when `|a| < |b|`. It loops about `log2(|a|/|b|)` times.

use crate::emit::{Emitter, Res};
use crate::names::{f32_lit, f64_lit, Class};
use rutile_ir::ir::UnaryOp;
use rutile_ir::mathfn::{TANH_SERIES, TANH_SERIES_BELOW};
use rutile_ir::ScalarType;

/// The float types PTX computes in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fk {
    F32,
    F64,
}

impl Fk {
    pub(crate) fn of(t: ScalarType) -> Fk {
        match t {
            ScalarType::F64 => Fk::F64,
            _ => Fk::F32,
        }
    }
    pub(crate) fn ty(self) -> &'static str {
        match self {
            Fk::F32 => "f32",
            Fk::F64 => "f64",
        }
    }
    fn class(self) -> Class {
        match self {
            Fk::F32 => Class::F,
            Fk::F64 => Class::Fd,
        }
    }
    fn int_class(self) -> Class {
        match self {
            Fk::F32 => Class::R,
            Fk::F64 => Class::Rd,
        }
    }
    fn bits(self) -> &'static str {
        match self {
            Fk::F32 => "b32",
            Fk::F64 => "b64",
        }
    }
    fn lit(self, x: f64) -> String {
        match self {
            Fk::F32 => f32_lit(x as f32),
            Fk::F64 => f64_lit(x),
        }
    }
    fn sign_mask(self) -> &'static str {
        match self {
            Fk::F32 => "0x80000000",
            Fk::F64 => "0x8000000000000000",
        }
    }
}

/// log2(e) rounded to f32, and the rest of it.
const LOG2E_HI: u32 = 0x3FB8AA3B;
const LOG2E_LO: u32 = 0x32A57060;
/// ln(2) rounded to f32.
const LN2: u32 = 0x3F317218;

/// erf(x) = x + x·P(x²) for |x| < 0.875; P's coefficients, constant term first.
const ERF_SMALL: [u32; 6] = [0x3E0375D3, 0xBEC09387, 0x3DE710C7, 0xBCDB7CE2, 0x3BA4F75D, 0xBA22E960];
/// ln(erfc(a)) = Q(a - 0.875) for 0.875 ≤ a ≤ 4; Q's coefficients, constant term first.
const ERF_LARGE: [u32; 9] = [
    0xBFC43397, 0xC01B88BD, 0xBF539775, 0xBD404A56, 0x3C3B64F8, 0xBB17128F, 0x39B76C6E, 0xB8114136, 0x35DC4443,
];
/// Where erf switches from the polynomial to `1 - exp(Q)`.
const ERF_SPLIT: f32 = 0.875;

fn hex(bits: u32) -> String {
    format!("0f{bits:08X}")
}

/// `op` of float register `x` (f32 or f64); returns the register holding the result.
pub(crate) fn unary(e: &mut Emitter, fk: Fk, op: UnaryOp, x: &str) -> Res<String> {
    let f = fk.ty();
    let r = e.tmp(fk.class());
    let one = |i: &str| format!("{i} {r}, {x}");
    let text = match (fk, op) {
        (_, UnaryOp::Neg) => one(&format!("neg.{f}")),
        (_, UnaryOp::Abs) => one(&format!("abs.{f}")),
        (_, UnaryOp::Sqrt) => one(&format!("sqrt.rn.{f}")),
        (_, UnaryOp::Floor) => one(&format!("cvt.rmi.{f}.{f}")),
        (_, UnaryOp::Ceil) => one(&format!("cvt.rpi.{f}.{f}")),
        (_, UnaryOp::Trunc) => one(&format!("cvt.rzi.{f}.{f}")),
        (_, UnaryOp::Rint) => one(&format!("cvt.rni.{f}.{f}")),
        (_, UnaryOp::Not | UnaryOp::Popc | UnaryOp::Clz | UnaryOp::Brev | UnaryOp::Ffs) => {
            return Err(format!("`{}` of {f} is not defined", op.name()))
        }
        (Fk::F64, UnaryOp::Rsqrt) => {
            let s = e.tmp(Class::Fd);
            e.ins(format!("sqrt.rn.f64 {s}, {x}"));
            format!("div.rn.f64 {r}, 0d3FF0000000000000, {s}")
        }
        (Fk::F64, _) => return Err(format!("f64 `{}` is not supported by the PTX backend yet", op.name())),
        // `.ftz`, as Triton's `exp2`: without it `ptxas` wraps each `MUFU.EX2` in a compare
        // and two predicated multiplies that keep subnormal results (2^x for x < -126), a
        // third of the instructions of an attention's softmax step. Subnormal inputs give
        // 1 either way.
        (Fk::F32, UnaryOp::Exp2) => one("ex2.approx.ftz.f32"),
        (Fk::F32, UnaryOp::Log2) => one("lg2.approx.f32"),
        (Fk::F32, UnaryOp::Rsqrt) => one("rsqrt.approx.f32"),
        (Fk::F32, UnaryOp::Sin) => one("sin.approx.f32"),
        (Fk::F32, UnaryOp::Cos) => one("cos.approx.f32"),
        (Fk::F32, UnaryOp::Log) => {
            let l = e.tmp(Class::F);
            e.ins(format!("lg2.approx.f32 {l}, {x}"));
            format!("mul.rn.f32 {r}, {l}, {}", hex(LN2))
        }
        (Fk::F32, UnaryOp::Exp) => return Ok(exp_f32(e, x)),
        (Fk::F32, UnaryOp::Erf) => return Ok(erf_f32(e, x)),
        (Fk::F32, UnaryOp::Tanh) => return Ok(tanh_f32(e, x)),
        (Fk::F32, UnaryOp::Sigmoid) => {
            // t = e^-|x| never overflows: 1 / (1 + t) for x ≥ 0, t / (1 + t) below, so that
            // results down to the subnormals survive.
            let (a, n, den, num) = (e.tmp(Class::F), e.tmp(Class::F), e.tmp(Class::F), e.tmp(Class::F));
            let pos = e.tmp(Class::Pred);
            e.ins(format!("abs.f32 {a}, {x}"));
            e.ins(format!("neg.f32 {n}, {a}"));
            let t = exp_f32(e, &n);
            e.ins(format!("add.rn.f32 {den}, {t}, 0f3F800000"));
            e.ins(format!("setp.ge.f32 {pos}, {x}, 0f00000000"));
            e.ins(format!("selp.f32 {num}, 0f3F800000, {t}, {pos}"));
            format!("div.rn.f32 {r}, {num}, {den}")
        }
    };
    e.ins(text);
    Ok(r)
}

/// e^x for f32 `x` (see the module docs).
fn exp_f32(e: &mut Emitter, x: &str) -> String {
    let [t, nt, d0, d1, p2, c, y, r] = [(); 8].map(|_| e.tmp(Class::F));
    let ok = e.tmp(Class::Pred);
    let fin = e.tmp(Class::Pred);
    e.ins(format!("mul.rn.f32 {t}, {x}, {}", hex(LOG2E_HI)));
    e.ins(format!("neg.f32 {nt}, {t}"));
    // d1 = x·log2(e) - t, the part of the exponent that t lost.
    e.ins(format!("fma.rn.f32 {d0}, {x}, {}, {nt}", hex(LOG2E_HI)));
    e.ins(format!("fma.rn.f32 {d1}, {x}, {}, {d0}", hex(LOG2E_LO)));
    e.ins(format!("ex2.approx.f32 {p2}, {t}"));
    e.ins(format!("mul.rn.f32 {c}, {d1}, {}", hex(LN2)));
    e.ins(format!("fma.rn.f32 {y}, {p2}, {c}, {p2}"));
    // Keep 2^t where the correction is meaningless: overflow (t ≥ 128) and infinite or NaN x.
    e.ins(format!("testp.finite.f32 {fin}, {d1}"));
    e.ins(format!("setp.lt.and.f32 {ok}, {t}, 0f43000000, {fin}"));
    e.ins(format!("selp.f32 {r}, {y}, {p2}, {ok}"));
    r
}

/// `c[0] + t·(c[1] + t·(...))` with `fma`.
fn horner(e: &mut Emitter, coefs: &[u32], t: &str) -> String {
    let mut acc = hex(*coefs.last().expect("the callers' coefficient tables are not empty"));
    for &c in coefs.iter().rev().skip(1) {
        let r = e.tmp(Class::F);
        e.ins(format!("fma.rn.f32 {r}, {acc}, {t}, {}", hex(c)));
        acc = r;
    }
    acc
}

/// erf(x) for f32 `x` (see the module docs).
fn erf_f32(e: &mut Emitter, x: &str) -> String {
    let a = e.tmp(Class::F);
    let s = e.tmp(Class::F);
    e.ins(format!("abs.f32 {a}, {x}"));
    // |x| < 0.875: x + x·P(x²).
    e.ins(format!("mul.rn.f32 {s}, {a}, {a}"));
    let p = horner(e, &ERF_SMALL, &s);
    let small = e.tmp(Class::F);
    e.ins(format!("fma.rn.f32 {small}, {x}, {p}, {x}"));
    // |x| ≥ 0.875: ±(1 - exp(Q(min(|x|, 4) - 0.875))).
    let (m, t) = (e.tmp(Class::F), e.tmp(Class::F));
    e.ins(format!("min.f32 {m}, {a}, 0f40800000"));
    e.ins(format!("sub.rn.f32 {t}, {m}, {}", f32_lit(ERF_SPLIT)));
    let q = horner(e, &ERF_LARGE, &t);
    let ex = exp_f32(e, &q);
    let l = e.tmp(Class::F);
    e.ins(format!("sub.rn.f32 {l}, 0f3F800000, {ex}"));
    let (sign, lb) = (e.tmp(Class::R), e.tmp(Class::R));
    let large = e.tmp(Class::F);
    e.ins(format!("and.b32 {sign}, {x}, 0x80000000"));
    e.ins(format!("or.b32 {lb}, {l}, {sign}"));
    e.ins(format!("mov.b32 {large}, {lb}"));
    // NaN fails the comparison and takes the polynomial, which gives NaN.
    let big = e.tmp(Class::Pred);
    let r = e.tmp(Class::F);
    e.ins(format!("setp.ge.f32 {big}, {a}, {}", f32_lit(ERF_SPLIT)));
    e.ins(format!("selp.f32 {r}, {large}, {small}, {big}"));
    r
}

/// tanh(x) for f32 `x`: `x · P(x²)` from [`TANH_SERIES`] where `|x| <` [`TANH_SERIES_BELOW`],
/// else `±(1 - 2 / (e^(2|x|) + 1))`, which is ±1 once `e^(2|x|)` overflows and NaN for NaN.
fn tanh_f32(e: &mut Emitter, x: &str) -> String {
    let coefs: Vec<u32> = TANH_SERIES.iter().map(|&c| (c as f32).to_bits()).collect();
    let (a, s, small) = (e.tmp(Class::F), e.tmp(Class::F), e.tmp(Class::F));
    e.ins(format!("abs.f32 {a}, {x}"));
    e.ins(format!("mul.rn.f32 {s}, {x}, {x}"));
    let p = horner(e, &coefs, &s);
    e.ins(format!("mul.rn.f32 {small}, {x}, {p}"));
    let two_a = e.tmp(Class::F);
    e.ins(format!("add.rn.f32 {two_a}, {a}, {a}"));
    let ex = exp_f32(e, &two_a);
    let (den, q, l) = (e.tmp(Class::F), e.tmp(Class::F), e.tmp(Class::F));
    e.ins(format!("add.rn.f32 {den}, {ex}, 0f3F800000"));
    e.ins(format!("div.rn.f32 {q}, 0f40000000, {den}"));
    e.ins(format!("sub.rn.f32 {l}, 0f3F800000, {q}"));
    let (sign, lb) = (e.tmp(Class::R), e.tmp(Class::R));
    let large = e.tmp(Class::F);
    e.ins(format!("and.b32 {sign}, {x}, 0x80000000"));
    e.ins(format!("or.b32 {lb}, {l}, {sign}"));
    e.ins(format!("mov.b32 {large}, {lb}"));
    // NaN fails the comparison and takes the series, which gives NaN.
    let big = e.tmp(Class::Pred);
    let r = e.tmp(Class::F);
    e.ins(format!("setp.ge.f32 {big}, {a}, {}", f32_lit(TANH_SERIES_BELOW as f32)));
    e.ins(format!("selp.f32 {r}, {large}, {small}, {big}"));
    r
}

/// C's `pow(x, y)` for f32 registers: `2^(y·log2|x|)`, negated for a negative base (or -0)
/// and an odd integer `y`, NaN for a finite negative base and a non-integer `y`, and 1 for
/// `y = ±0`, `x = 1` and `x = -1` with an infinite `y`. Infinite `y` counts as an even
/// integer, which gives C's results for every base.
pub(crate) fn pow_f32(e: &mut Emitter, x: &str, y: &str) -> String {
    let [a, l, t, p, yi, h, hi, n, sr, neg_p] = [(); 10].map(|_| e.tmp(Class::F));
    e.ins(format!("abs.f32 {a}, {x}"));
    e.ins(format!("lg2.approx.f32 {l}, {a}"));
    e.ins(format!("mul.rn.f32 {t}, {y}, {l}"));
    e.ins(format!("ex2.approx.f32 {p}, {t}"));
    let [int, odd, neg, finite_neg, nan, one, q] = [(); 7].map(|_| e.tmp(Class::Pred));
    // Integer: unchanged by truncation (also ±inf); odd: its half is not an integer.
    e.ins(format!("cvt.rzi.f32.f32 {yi}, {y}"));
    e.ins(format!("setp.eq.f32 {int}, {yi}, {y}"));
    e.ins(format!("mul.rn.f32 {h}, {y}, 0f3F000000"));
    e.ins(format!("cvt.rzi.f32.f32 {hi}, {h}"));
    e.ins(format!("setp.ne.and.f32 {odd}, {hi}, {h}, {int}"));
    let (bits, sign) = (e.tmp(Class::R), e.tmp(Class::R));
    e.ins(format!("mov.b32 {bits}, {x}"));
    e.ins(format!("and.b32 {sign}, {bits}, 0x80000000"));
    e.ins(format!("setp.ne.and.u32 {neg}, {sign}, 0, {odd}"));
    e.ins(format!("neg.f32 {neg_p}, {p}"));
    e.ins(format!("selp.f32 {sr}, {neg_p}, {p}, {neg}"));
    // A finite negative base with a non-integer exponent (NaN exponents included).
    e.ins(format!("setp.lt.f32 {finite_neg}, {x}, 0f00000000"));
    e.ins(format!("setp.gt.and.f32 {finite_neg}, {x}, 0fFF800000, {finite_neg}"));
    e.ins(format!("not.pred {q}, {int}"));
    e.ins(format!("and.pred {nan}, {finite_neg}, {q}"));
    e.ins(format!("selp.f32 {n}, 0f7FC00000, {sr}, {nan}"));
    // y = ±0, x = 1, or |x| = 1 with y = ±inf: 1.
    let (ay, r) = (e.tmp(Class::F), e.tmp(Class::F));
    e.ins(format!("abs.f32 {ay}, {y}"));
    e.ins(format!("setp.eq.f32 {one}, {a}, 0f3F800000"));
    e.ins(format!("setp.eq.and.f32 {one}, {ay}, 0f7F800000, {one}"));
    e.ins(format!("setp.eq.or.f32 {one}, {x}, 0f3F800000, {one}"));
    e.ins(format!("setp.eq.or.f32 {one}, {y}, 0f00000000, {one}"));
    e.ins(format!("selp.f32 {r}, 0f3F800000, {n}, {one}"));
    r
}

/// IEEE `minimum` (`max` false) or `maximum` of float registers `a` and `b`: NaN if either is
/// NaN, -0.0 below +0.0. Returns the result register.
pub(crate) fn minmax(e: &mut Emitter, fk: Fk, max: bool, a: &str, b: &str) -> String {
    let f = fk.ty();
    let i = if max { "max" } else { "min" };
    let r = e.tmp(fk.class());
    if fk == Fk::F32 && e.target.has_sm80() {
        e.ins(format!("{i}.NaN.f32 {r}, {a}, {b}"));
        return r;
    }
    // min/max return the other operand when one is NaN, and either zero when both are zeros.
    let m = e.tmp(fk.class());
    e.ins(format!("{i}.{f} {m}, {a}, {b}"));
    // Equal operands have equal bits except for zeros of both signs: OR the bits for minimum
    // (-0.0 wins), AND them for maximum (+0.0 wins).
    let w = fk.bits();
    let (ia, ib, c) = (e.tmp(fk.int_class()), e.tmp(fk.int_class()), e.tmp(fk.int_class()));
    let z = e.tmp(fk.class());
    e.ins(format!("mov.{w} {ia}, {a}"));
    e.ins(format!("mov.{w} {ib}, {b}"));
    e.ins(format!("{}.{w} {c}, {ia}, {ib}", if max { "and" } else { "or" }));
    e.ins(format!("mov.{w} {z}, {c}"));
    let (eq, nan) = (e.tmp(Class::Pred), e.tmp(Class::Pred));
    let m2 = e.tmp(fk.class());
    e.ins(format!("setp.eq.{f} {eq}, {a}, {b}"));
    e.ins(format!("selp.{f} {m2}, {z}, {m}, {eq}"));
    e.ins(format!("setp.nan.{f} {nan}, {a}, {b}"));
    e.ins(format!("selp.{f} {r}, {}, {m2}, {nan}", fk.lit(f64::NAN)));
    r
}

/// C's `fmod(a, b)` of float registers, exactly. Returns the result register.
pub(crate) fn fmod(e: &mut Emitter, fk: Fk, a: &str, b: &str) -> String {
    let f = fk.ty();
    let c = fk.class();
    let (x, y, ys, t) = (e.tmp(c), e.tmp(c), e.tmp(c), e.tmp(c));
    let (ok, ok2, p) = (e.tmp(Class::Pred), e.tmp(Class::Pred), e.tmp(Class::Pred));
    let (up, down, bad, done) = (e.new_label(), e.new_label(), e.new_label(), e.new_label());
    let inf = fk.lit(f64::INFINITY);
    e.ins(format!("abs.{f} {x}, {a}"));
    e.ins(format!("abs.{f} {y}, {b}"));
    // NaN unless |a| is finite and |b| > 0 (both false for NaNs).
    e.ins(format!("setp.lt.{f} {ok}, {x}, {inf}"));
    e.ins(format!("setp.gt.and.{f} {ok2}, {y}, {}, {ok}", fk.lit(0.0)));
    e.ins(format!("@!{ok2} bra {bad}"));
    e.ins(format!("setp.lt.{f} {p}, {x}, {y}"));
    e.ins(format!("@{p} bra {done}"));
    // ys = the largest |b|·2^k ≤ |a|.
    e.ins(format!("mov.{f} {ys}, {y}"));
    e.place_label(&up);
    e.ins(format!("mul.rn.{f} {t}, {ys}, {}", fk.lit(2.0)));
    e.ins(format!("setp.le.{f} {p}, {t}, {x}"));
    e.ins(format!("@!{p} bra {down}"));
    e.ins(format!("mov.{f} {ys}, {t}"));
    e.ins(format!("bra {up}"));
    // Subtract ys where it fits (exactly: ys ≤ x < 2·ys), halve it, until it is |b| again.
    e.place_label(&down);
    e.ins(format!("setp.ge.{f} {p}, {x}, {ys}"));
    e.ins(format!("@{p} sub.rn.{f} {x}, {x}, {ys}"));
    e.ins(format!("setp.eq.{f} {p}, {ys}, {y}"));
    e.ins(format!("@{p} bra {done}"));
    e.ins(format!("mul.rn.{f} {ys}, {ys}, {}", fk.lit(0.5)));
    e.ins(format!("bra {down}"));
    e.place_label(&bad);
    e.ins(format!("mov.{f} {x}, {}", fk.lit(f64::NAN)));
    e.place_label(&done);
    // The sign of a.
    let w = fk.bits();
    let (sa, sx) = (e.tmp(fk.int_class()), e.tmp(fk.int_class()));
    let r = e.tmp(c);
    e.ins(format!("and.{w} {sa}, {a}, {}", fk.sign_mask()));
    e.ins(format!("mov.{w} {sx}, {x}"));
    e.ins(format!("or.{w} {sx}, {sx}, {sa}"));
    e.ins(format!("mov.{w} {r}, {sx}"));
    r
}
