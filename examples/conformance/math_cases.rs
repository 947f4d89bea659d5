//! Cases of the element-wise math beyond the operators: `tanh`, `pow`, `umulhi`,
//! `byte_perm`, `clamp`, the inverse trigonometric functions, `tan`, `sin_precise`,
//! `cos_precise`, `sinpi`, `cospi`, `erfinv`, `erfc`, `erfcx`, `lgamma`, `tgamma`,
//! `normcdf`, `erfcinv`, `normcdfinv`, `cyl_bessel_i0`, `cyl_bessel_i1`, `j0`, `j1`, `y0`,
//! `y1`, libdevice's `expm1` ... `atanh`, `hypot` and `cbrt`, the float classification
//! functions, `nextafter`, `fdim`, `remainder`, `copysign` and `round`, `ldexp`, `frexp`,
//! `ilogb` and `logb`; and integer division by constants, which the lowering rewrites where
//! they are powers of two.

use super::*;

/// `tanh` on every type (floats only are accepted) over the range where it is not yet ±1,
/// with the special values.
fn tanh_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for t in DTYPES {
        let (domain, rule) = if t.is_float() {
            let d = Domain::Range {
                lo: -10.0,
                hi: 10.0,
                lo2: -20,
                hi2: 4,
            };
            (d, Rule::Float { op: "tanh", arg: 0 })
        } else {
            (Domain::General, Rule::Exact)
        };
        cases.extend(elementwise_cases("tanh", &[(t, domain)], t, rule, |_, x| x[0].tanh()));
    }
    cases
}

/// Bases of magnitude 1/4 to 4 of both signs (so `|y·log2 x| ≤ 2|y|`, where the bounds
/// hold), and the special bases.
fn pow_bases(t: ScalarType, n: usize, seed: u64) -> Vec<V> {
    let mut rng = Rng::new(seed);
    let specials = [0.0, -0.0, 1.0, -1.0, f64::INFINITY, f64::NEG_INFINITY, f64::NAN];
    (0..n)
        .map(|_| {
            let x = match rng.below(6) {
                0 => rng.pick(&specials),
                _ => {
                    let s = if rng.below(2) == 0 { 1.0 } else { -1.0 };
                    s * 2f64.powf(rng.range(-2.0, 2.0))
                }
            };
            quantize(t, V::F(x))
        })
        .collect()
}

/// Exponents in [-4, 4]: integers half of the time (negative bases give results only for
/// them, negated for odd ones), and the special exponents.
fn pow_exponents(t: ScalarType, n: usize, seed: u64) -> Vec<V> {
    let mut rng = Rng::new(seed);
    let specials = [0.0, -0.0, f64::INFINITY, f64::NEG_INFINITY, f64::NAN, 0.5];
    (0..n)
        .map(|_| {
            let y = match rng.below(8) {
                0 => rng.pick(&specials),
                1..=4 => rng.range(-4.0, 4.0).round(),
                _ => rng.range(-4.0, 4.0),
            };
            quantize(t, V::F(y))
        })
        .collect()
}

/// f64 bases of every exponent with exponents that keep `|y·log2 x|` up to 1100 (so that
/// results reach overflow and the subnormals), where `log2 x` must be known to about
/// 2^-64: `pow(wide)`, f64 only.
fn wide_pow_arguments(n: usize, seed: u64) -> (Vec<V>, Vec<V>) {
    let mut rng = Rng::new(seed);
    (0..n)
        .map(|_| {
            let x = f64::from_bits(rng.u64() & 0x7FEF_FFFF_FFFF_FFFF);
            let l = x.log2().abs().max(1e-3);
            let y = rng.range(-1100.0, 1100.0) / l;
            let y = if rng.below(4) == 0 { y.round() } else { y };
            let x = if y.fract() == 0.0 && rng.below(2) == 0 { -x } else { x };
            (V::F(x), V::F(y))
        })
        .unzip()
}

fn pow_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    let mut wide = elementwise_cases(
        "pow(wide)",
        &[(F64, Domain::General), (F64, Domain::General)],
        F64,
        Rule::Float {
            op: "pow(wide)",
            arg: 1,
        },
        |k, x| k.pow(x[0], x[1]),
    );
    for (i, c) in wide.iter_mut().enumerate() {
        let n = c.bufs[0].init.len();
        (c.bufs[0].init, c.bufs[1].init) = wide_pow_arguments(n, 900 + i as u64);
    }
    cases.extend(wide);
    for t in DTYPES {
        let rule = if t.is_float() {
            Rule::Float { op: "pow", arg: 1 }
        } else {
            Rule::Exact
        };
        let mut cs = elementwise_cases("pow", &[(t, Domain::General), (t, Domain::General)], t, rule, |k, x| {
            k.pow(x[0], x[1])
        });
        if t.is_float() {
            for (i, c) in cs.iter_mut().enumerate() {
                let n = c.bufs[0].init.len();
                c.bufs[0].init = pow_bases(t, n, 700 + i as u64);
                c.bufs[1].init = pow_exponents(t, n, 800 + i as u64);
            }
        }
        cases.extend(cs);
    }
    cases
}

fn umulhi_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for t in DTYPES {
        cases.extend(elementwise_cases(
            "umulhi",
            &[(t, Domain::General), (t, Domain::General)],
            t,
            Rule::Exact,
            |k, x| k.umulhi(x[0], x[1]),
        ));
    }
    cases
}

/// `byte_perm(x, y, selector)` on every type (i32 and u32 accepted), selectors of every
/// bit pattern.
fn byte_perm_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for t in DTYPES {
        cases.extend(elementwise_cases(
            "byte_perm",
            &[(t, Domain::General), (t, Domain::General), (t, Domain::General)],
            t,
            Rule::Exact,
            |k, x| k.byte_perm(x[0], x[1], x[2]),
        ));
    }
    cases
}

/// `clamp(x, lo, hi)` with `lo ≤ hi` (Triton leaves `lo > hi` unspecified); bounds and `x`
/// are drawn alike, so each side of the range is hit. Float subnormals become zeros of their
/// sign: Vulkan may flush them in the comparisons, which the `minimum`/`maximum` rows cover.
fn clamp_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for t in DTYPES {
        let mut cs = elementwise_cases(
            "clamp",
            &[(t, Domain::General), (t, Domain::General), (t, Domain::General)],
            t,
            Rule::Exact,
            |k, x| k.clamp(x[0], x[1], x[2]),
        );
        for c in &mut cs {
            let n = c.bufs[0].init.len();
            if t.is_float() {
                let smallest_normal = match t {
                    F16 => 2f64.powi(-14),
                    BF16 | F32 => 2f64.powi(-126),
                    _ => f64::MIN_POSITIVE,
                };
                for b in &mut c.bufs[..3] {
                    for v in &mut b.init {
                        let x = v.f();
                        if x != 0.0 && x.abs() < smallest_normal {
                            *v = V::F(0.0f64.copysign(x));
                        }
                    }
                }
            }
            for i in 0..n {
                let (lo, hi) = (c.bufs[1].init[i], c.bufs[2].init[i]);
                let swap = if t.is_float() { lo.f() > hi.f() } else { lo.i() > hi.i() };
                if swap {
                    c.bufs[1].init[i] = hi;
                    c.bufs[2].init[i] = lo;
                }
            }
        }
        cases.extend(cs);
    }
    cases
}

/// `/`, `%` and `cdiv` of every integer type by constants: powers of two, which the lowering
/// turns into shifts and masks for 32- and 64-bit types (`thread::reduce_constant_divisions`),
/// and others, which stay divisions; dividends over the whole range, negative ones included.
fn constant_division_cases() -> Vec<Case> {
    type ByConstant = for<'b> fn(&'b KernelBuilder, Value<'b>, i64) -> Value<'b>;
    let ops: [(&str, ByConstant); 3] = [
        ("div", |_, x, c| x / c),
        ("rem", |_, x, c| x % c),
        ("cdiv", |k, x, c| k.cdiv(x, c)),
    ];
    let mut cases = Vec::new();
    for t in DTYPES.into_iter().filter(|t| t.is_int()) {
        for c in [1i64, 2, 64, 3, -8] {
            if c < 0 && !t.is_signed_int() {
                continue;
            }
            for (op, f) in ops {
                let name = format!("{op}_by_{}{}", if c < 0 { "minus_" } else { "" }, c.abs());
                cases.extend(elementwise_cases(
                    &name,
                    &[(t, Domain::General)],
                    t,
                    Rule::Exact,
                    move |k, x| f(k, x[0], c),
                ));
            }
        }
    }
    cases
}

/// `asin`, `acos` (over [-1, 1]), `atan` and `atan2` (over [-10, 10] and down to 2^-20),
/// `tan`, `sin_precise`, `cos_precise` (over every exponent to the largest f32), `sinpi`,
/// `cospi` (over [-100, 100] and down to 2^-20), `erfinv` (over [-1, 1]), `erfc` (over
/// [-5, 10]), `erfcx` (over [-9, 1000]), `lgamma` (over [-2, 100]), `tgamma` (over
/// [-43, 36]), `normcdf` (over [-14, 8]), `erfcinv` (over [0, 2]) and `normcdfinv` (over
/// [0, 1], both down to 2^-126), `cyl_bessel_i0` and `cyl_bessel_i1` (over [-92, 92]),
/// `j0`, `j1`, `jn(5)` (over [-100, 100]), `y0`, `y1` and `yn(5)` (over [0, 100]), with the
/// special values, on every type (the floats each accepts: f64 for the inverse
/// trigonometric functions, `tan`, `sin_precise`, `cos_precise`, `sinpi`, `cospi`,
/// `erfc`, `erfcx`, `erfinv`, `lgamma`, `tgamma`, `normcdf`, `erfcinv`, `normcdfinv` and
/// the Bessel functions).
fn inverse_trig_cases() -> Vec<Case> {
    type Unary = for<'b> fn(Value<'b>) -> Value<'b>;
    let unit = Domain::Range {
        lo: -1.0,
        hi: 1.0,
        lo2: -20,
        hi2: 0,
    };
    let wide = Domain::Range {
        lo: -10.0,
        hi: 10.0,
        lo2: -20,
        hi2: 4,
    };
    let turns = Domain::Range {
        lo: -100.0,
        hi: 100.0,
        lo2: -20,
        hi2: 6,
    };
    let erfc_range = Domain::Range {
        lo: -5.0,
        hi: 10.0,
        lo2: -20,
        hi2: 3,
    };
    let erfcx_range = Domain::Range {
        lo: -9.0,
        hi: 1000.0,
        lo2: -20,
        hi2: 10,
    };
    // lgamma above -2, where the reflection does not subtract close values.
    let lgamma_range = Domain::Range {
        lo: -2.0,
        hi: 100.0,
        lo2: -20,
        hi2: 7,
    };
    let tgamma_range = Domain::Range {
        lo: -43.0,
        hi: 36.0,
        lo2: -20,
        hi2: 6,
    };
    let normcdf_range = Domain::Range {
        lo: -14.0,
        hi: 8.0,
        lo2: -20,
        hi2: 3,
    };
    let erfcinv_range = Domain::Range {
        lo: 0.0,
        hi: 2.0,
        lo2: -126,
        hi2: 0,
    };
    let unit_range = Domain::Range {
        lo: 0.0,
        hi: 1.0,
        lo2: -126,
        hi2: -1,
    };
    let bessel_range = Domain::Range {
        lo: -92.0,
        hi: 92.0,
        lo2: -20,
        hi2: 6,
    };
    // Every exponent up to the largest f32: the reductions by π/2.
    let any_angle = Domain::Range {
        lo: -3.0e38,
        hi: 3.0e38,
        lo2: -20,
        hi2: 127,
    };
    let bessel_first = Domain::Range {
        lo: -100.0,
        hi: 100.0,
        lo2: -20,
        hi2: 7,
    };
    let bessel_second = Domain::Range {
        lo: 0.0,
        hi: 100.0,
        lo2: -20,
        hi2: 7,
    };
    let unary: [(&str, Domain, Unary); 24] = [
        ("asin", unit, |x| x.asin()),
        ("acos", unit, |x| x.acos()),
        ("atan", wide, |x| x.atan()),
        ("tan", any_angle, |x| x.tan()),
        ("sin_precise", any_angle, |x| x.sin_precise()),
        ("cos_precise", any_angle, |x| x.cos_precise()),
        ("sinpi", turns, |x| x.sinpi()),
        ("cospi", turns, |x| x.cospi()),
        ("erfinv", unit, |x| x.erfinv()),
        ("erfc", erfc_range, |x| x.erfc()),
        ("erfcx", erfcx_range, |x| x.erfcx()),
        ("lgamma", lgamma_range, |x| x.lgamma()),
        ("tgamma", tgamma_range, |x| x.tgamma()),
        ("normcdf", normcdf_range, |x| x.normcdf()),
        ("erfcinv", erfcinv_range, |x| x.erfcinv()),
        ("normcdfinv", unit_range, |x| x.normcdfinv()),
        ("cyl_bessel_i0", bessel_range, |x| x.cyl_bessel_i0()),
        ("cyl_bessel_i1", bessel_range, |x| x.cyl_bessel_i1()),
        ("j0", bessel_first, |x| x.j0()),
        ("j1", bessel_first, |x| x.j1()),
        ("y0", bessel_second, |x| x.y0()),
        ("y1", bessel_second, |x| x.y1()),
        ("jn(5)", bessel_first, |x| x.jn(5)),
        ("yn(5)", bessel_second, |x| x.yn(5)),
    ];
    let mut cases = Vec::new();
    for t in DTYPES {
        let float = t.is_float();
        for (op, domain, f) in unary {
            let (rule, domain) = if float {
                (Rule::Float { op, arg: 0 }, domain)
            } else {
                (Rule::Exact, Domain::General)
            };
            cases.extend(elementwise_cases(op, &[(t, domain)], t, rule, move |_, x| f(x[0])));
        }
        let (rule, domain) = if float {
            (Rule::Float { op: "atan2", arg: 0 }, wide)
        } else {
            (Rule::Exact, Domain::General)
        };
        cases.extend(elementwise_cases(
            "atan2",
            &[(t, domain), (t, domain)],
            t,
            rule,
            |k, x| k.atan2(x[0], x[1]),
        ));
    }
    cases
}

/// libdevice's `expm1` ... `atanh` (compositions; every float, f64 computed in f64) over
/// their domains with the special values, on every type.
fn exp_log_cases() -> Vec<Case> {
    let range = |lo, hi, lo2, hi2| Domain::Range { lo, hi, lo2, hi2 };
    let functions: [(&str, Domain, UnaryFn); 9] = [
        ("expm1", range(-20.0, 88.0, -20, 6), |x| x.expm1()),
        ("log1p", range(-1.0, 100.0, -20, 20), |x| x.log1p()),
        ("exp10", range(-37.0, 38.0, -20, 5), |x| x.exp10()),
        ("log10", range(0.0, 100.0, -20, 30), |x| x.log10()),
        ("sinh", range(-88.0, 88.0, -20, 6), |x| x.sinh()),
        ("cosh", range(-88.0, 88.0, -20, 6), |x| x.cosh()),
        ("asinh", range(-100.0, 100.0, -20, 20), |x| x.asinh()),
        ("acosh", range(1.0, 100.0, -20, 20), |x| x.acosh()),
        ("atanh", range(-1.0, 1.0, -20, 0), |x| x.atanh()),
    ];
    let mut cases = Vec::new();
    for t in DTYPES {
        for (op, domain, f) in functions {
            let (rule, domain) = if t.is_float() {
                (Rule::Float { op, arg: 0 }, domain)
            } else {
                (Rule::Exact, Domain::General)
            };
            cases.extend(elementwise_cases(op, &[(t, domain)], t, rule, move |_, x| f(x[0])));
        }
    }
    cases
}

/// libdevice's `hypot` (over [-1000, 1000] and magnitudes from 2^-20 to 2^60, where the
/// squares alone would overflow) and `cbrt` (over [-1000, 1000] and 2^-20 to 2^30), with the
/// special values, on every type (every float, f64 computed in f64).
fn root_cases() -> Vec<Case> {
    let range = |lo2, hi2| Domain::Range {
        lo: -1000.0,
        hi: 1000.0,
        lo2,
        hi2,
    };
    let mut cases = Vec::new();
    for t in DTYPES {
        let float = t.is_float();
        let rule = |op| if float { Rule::Float { op, arg: 0 } } else { Rule::Exact };
        let domain = |d| if float { d } else { Domain::General };
        cases.extend(elementwise_cases(
            "hypot",
            &[(t, domain(range(-20, 60))), (t, domain(range(-20, 60)))],
            t,
            rule("hypot"),
            |k, x| k.hypot(x[0], x[1]),
        ));
        cases.extend(elementwise_cases(
            "cbrt",
            &[(t, domain(range(-20, 30)))],
            t,
            rule("cbrt"),
            |_, x| x[0].cbrt(),
        ));
        cases.extend(elementwise_cases(
            "rcbrt",
            &[(t, domain(range(-20, 30)))],
            t,
            rule("rcbrt"),
            |_, x| x[0].rcbrt(),
        ));
        let d = domain(range(-20, 60));
        cases.extend(elementwise_cases(
            "rhypot",
            &[(t, d), (t, d)],
            t,
            rule("rhypot"),
            |k, x| k.rhypot(x[0], x[1]),
        ));
        cases.extend(elementwise_cases("norm3d", &[(t, d); 3], t, rule("norm3d"), |k, x| {
            k.norm3d(x[0], x[1], x[2])
        }));
        cases.extend(elementwise_cases("norm4d", &[(t, d); 4], t, rule("norm4d"), |k, x| {
            k.norm4d(x[0], x[1], x[2], x[3])
        }));
        cases.extend(elementwise_cases(
            "rnorm3d",
            &[(t, d); 3],
            t,
            rule("rnorm3d"),
            |k, x| k.rnorm3d(x[0], x[1], x[2]),
        ));
        cases.extend(elementwise_cases(
            "rnorm4d",
            &[(t, d); 4],
            t,
            rule("rnorm4d"),
            |k, x| k.rnorm4d(x[0], x[1], x[2], x[3]),
        ));
    }
    cases
}

/// `hadd`, `rhadd`, `sad` (every integer type), `mulhi` (i32 and i64) and `mul24` (i32 and
/// u32) on every type (others not accepted): exact, extremes included.
fn integer_math_cases() -> Vec<Case> {
    let functions: [(&str, BinaryFn); 4] = [
        ("hadd", |k, a, b| k.hadd(a, b)),
        ("rhadd", |k, a, b| k.rhadd(a, b)),
        ("mulhi", |k, a, b| k.mulhi(a, b)),
        ("mul24", |k, a, b| k.mul24(a, b)),
    ];
    let mut cases = Vec::new();
    for t in DTYPES {
        for (op, f) in functions {
            cases.extend(elementwise_cases(
                op,
                &[(t, Domain::General), (t, Domain::General)],
                t,
                Rule::Exact,
                move |k, x| f(k, x[0], x[1]),
            ));
        }
        cases.extend(elementwise_cases(
            "sad",
            &[(t, Domain::General); 3],
            t,
            Rule::Exact,
            |k, x| k.sad(x[0], x[1], x[2]),
        ));
    }
    cases
}

/// `nextafter`, `fdim`, `remainder`, `fmax`, `fmin`, `modf`'s two parts, `isnan`, `isinf`,
/// `isfinite`, `signbit` (as i32), `copysign` and `round` on every type (floats only accepted): exact, NaNs, infinities, signed zeros and
/// subnormals included.
fn float_class_cases() -> Vec<Case> {
    let functions: [(&str, BinaryFn); 13] = [
        ("nextafter", |_, x, y| x.nextafter(y)),
        ("fdim", |_, x, y| x.fdim(y)),
        ("remainder", |_, x, y| x.remainder(y)),
        ("fmax", |_, x, y| x.fmax(y)),
        ("fmin", |_, x, y| x.fmin(y)),
        ("modf(fraction)", |_, x, _| x.modf().0),
        ("modf(integral)", |_, x, _| x.modf().1),
        ("isnan", |_, x, _| x.isnan()),
        ("isinf", |_, x, _| x.isinf()),
        ("isfinite", |_, x, _| x.isfinite()),
        ("signbit", |_, x, _| x.signbit()),
        ("copysign", |_, x, y| x.copysign(y)),
        ("round", |_, x, _| x.round()),
    ];
    let mut cases = Vec::new();
    for t in DTYPES {
        for (op, f) in functions {
            let keeps_type = matches!(
                op,
                "copysign"
                    | "round"
                    | "nextafter"
                    | "fdim"
                    | "remainder"
                    | "fmax"
                    | "fmin"
                    | "modf(fraction)"
                    | "modf(integral)"
            );
            let out = if keeps_type { t } else { I32 };
            cases.extend(elementwise_cases(
                op,
                &[(t, Domain::General), (t, Domain::General)],
                out,
                Rule::Exact,
                move |k, x| f(k, x[0], x[1]),
            ));
        }
    }
    cases
}

/// `ldexp` (by i32 exponents of any size), `frexp`'s significand and exponent, `ilogb` (as
/// i32) and `logb` on every type (every float, f64 in its own format): exact, subnormals
/// and the special values included.
fn exponent_cases() -> Vec<Case> {
    let mut cases = Vec::new();
    for t in DTYPES {
        cases.extend(elementwise_cases(
            "ldexp",
            &[(t, Domain::General), (I32, Domain::General)],
            t,
            Rule::Exact,
            |_, x| x[0].ldexp(x[1]),
        ));
        let one: [(&str, ScalarType, UnaryFn); 4] = [
            ("frexp(significand)", t, |x| x.frexp().0),
            ("frexp(exponent)", I32, |x| x.frexp().1),
            ("ilogb", I32, |x| x.ilogb()),
            ("logb", t, |x| x.logb()),
        ];
        for (op, out, f) in one {
            cases.extend(elementwise_cases(
                op,
                &[(t, Domain::General)],
                out,
                Rule::Exact,
                move |_, x| f(x[0]),
            ));
        }
    }
    cases
}

/// Every case of this file.
pub(super) fn math_cases() -> Vec<Case> {
    let mut all = tanh_cases();
    all.extend(inverse_trig_cases());
    all.extend(exp_log_cases());
    all.extend(root_cases());
    all.extend(float_class_cases());
    all.extend(exponent_cases());
    all.extend(constant_division_cases());
    all.extend(pow_cases());
    all.extend(umulhi_cases());
    all.extend(integer_math_cases());
    all.extend(byte_perm_cases());
    all.extend(clamp_cases());
    all
}
