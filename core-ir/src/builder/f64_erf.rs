//! `erf` of f64 values, written out in f64 ops (f64_math.rs routes the op here), and
//! libdevice's `erfc` and `erfcx` of them (erfc.rs routes f64 here): PTX has no f64 error
//! function, and backend-spirv's is computed in f32.
//!
//! For `a = |x|`: below 1, `erf(a) = a + a·(P(a²) - 1)` (the larger part exact); from 1/2
//! to 6, `erfc(a) = e^(-a²)·R(a)`, `R` being `erfcx` on four intervals, a polynomial in `a`
//! less the interval's centre, and from 6 to 28 `e^(-a²)·G(1/a²)/a` (`e^(-a²)` from
//! f64_math.rs's reduction, with `a²`'s rounding error taken back by a fused multiply-add,
//! its power of two applied last); `erf = 1 - erfc` from 1, 1 from 6, where `erfc(a)` is
//! below a quarter of an ulp of 1; `erfc = 1 - erf` below 1/2, 0 from 28.
//! `erf(-x) = -erf(x)`, `erfc(-x) = 2 - erfc(x)`. `scripts/fit_erf_f64.py` fits and prints
//! the polynomials; `core-ir/tests/f64_math.rs` measures both against the libm crate's
//! (musl's).

use super::f64_math::{divide, exp_reduced_within, scale};
use super::in_f32::horner;
use super::Value;

/// `erf(a)/a - 1` in `a²` on `[0, 1]`, highest first.
#[allow(clippy::excessive_precision)]
const SMALL: [f64; 13] = [
    5.957176147748911e-11,
    -1.1372848856791674e-09,
    1.4659775274047436e-08,
    -1.6350312701054695e-07,
    1.6461000484121368e-06,
    -1.4925595266831182e-05,
    0.0001205533111164271,
    -0.000854832698083379,
    0.0052239776248180145,
    -0.026866170645076792,
    0.11283791670954879,
    -0.3761263890318375,
    0.1283791670955126,
];

/// `erfcx(a)` on `[1/2, 1]`, `[1, 2]`, `[2, 3.5]` and `[3.5, 6]`, each in `a` less its
/// interval's centre, highest first.
#[allow(clippy::excessive_precision)]
const PIECES: [[f64; 17]; 4] = [
    [
        4.4454451280847605e-07,
        -1.4588542973779605e-06,
        4.5426255554213065e-06,
        -1.4084645276562734e-05,
        4.237254464835813e-05,
        -0.0001233545973934497,
        0.00034675066079882706,
        -0.000938512054126988,
        0.00243763736079733,
        -0.006051532297346454,
        0.01428919866593539,
        -0.03189726203968045,
        0.06679054252756873,
        -0.1298360619948811,
        0.2309581315512983,
        -0.3679726916557954,
        0.5069376502931449,
    ],
    [
        1.3242541506849586e-08,
        -4.9545807838901603e-08,
        1.6714292901928126e-07,
        -5.944961119917664e-07,
        2.0670657912156654e-06,
        -6.97536222785843e-06,
        2.2864299608127746e-05,
        -7.265887301589559e-05,
        0.0002233099453004411,
        -0.0006619300701084315,
        0.0018861348769919975,
        -0.0051459575478377826,
        0.013377340953067394,
        -0.03293090529956527,
        0.0761510398554774,
        -0.16362291773256005,
        0.3215854164543175,
    ],
    [
        8.831959586426476e-11,
        -4.056754880659121e-10,
        1.6207327188991065e-09,
        -7.156467021431838e-09,
        3.121415013712102e-08,
        -1.3264839014463818e-07,
        5.519743740073735e-07,
        -2.247366566986457e-06,
        8.94015629298454e-06,
        -3.469861074039318e-05,
        0.0001311818005084561,
        -0.00048219508487679243,
        0.0017195818852900986,
        -0.005934337897002171,
        0.019758592987322854,
        -0.06323763756063479,
        0.1936620962790687,
    ],
    [
        1.6722457190056534e-13,
        -1.0277932486024302e-12,
        5.138680596045611e-12,
        -3.0750980426473406e-11,
        1.849140276993934e-10,
        -1.081455682633195e-09,
        6.242341780249905e-09,
        -3.5595168000590696e-08,
        2.002920135090727e-07,
        -1.1115679931156728e-06,
        6.081114539531e-06,
        -3.2775781066528116e-05,
        0.00017392830404186873,
        -0.0009080988970373065,
        0.0046613263689723,
        -0.023503448598162904,
        0.11630270721024731,
    ],
];
/// `a·erfcx(a)` in `t = 1/a²` on `[1/28², 1/36]`, highest first.
#[allow(clippy::excessive_precision)]
const TAIL: [f64; 13] = [
    6135183.538536287,
    -1775064.753088658,
    281870.2262830575,
    -35750.597984202046,
    4422.235777150299,
    -594.9803704621736,
    91.62983970264588,
    -16.661172754118613,
    3.7024938837550563,
    -1.057855468288502,
    0.42314218765904166,
    -0.28209479177387614,
    0.5641895835477563,
];
/// Where each piece starts, and its centre.
const STARTS: [f64; 4] = [0.5, 1.0, 2.0, 3.5];
const CENTRES: [f64; 4] = [0.75, 1.5, 2.75, 4.75];
/// From here `erf` is 1 to f64's precision, and `erfc` takes the tail's fit.
const ONE_FROM: f64 = 6.0;
/// From here `erfc` is below the smallest subnormal (it is from 27.3).
const ERFC_ZERO_FROM: f64 = 28.0;

/// `erfcx(b)` for `b` in `[1/2, 6]`: the piece's coefficients and centre, chosen by `b`
/// before one Horner evaluation.
fn erfcx_pieces(b: Value<'_>) -> Value<'_> {
    let k = b.builder;
    let pick = |values: [f64; 4]| {
        (1..4).fold(k.zeros_like(b) + values[0], |v, i| {
            k.where_(b.ge(STARTS[i]), values[i], v)
        })
    };
    let coefficients: Vec<Value<'_>> = (0..PIECES[0].len())
        .map(|i| pick([PIECES[0][i], PIECES[1][i], PIECES[2][i], PIECES[3][i]]))
        .collect();
    horner(b - pick(CENTRES), &coefficients)
}

/// `erfcx(b)` for `b` in `[1/2, 28]` (clamped there): the pieces up to 6, the tail's
/// `G(1/b²)/b` from there.
pub(super) fn erfcx_from_half(b: Value<'_>) -> Value<'_> {
    let k = b.builder;
    let c = b.clamp(ONE_FROM, ERFC_ZERO_FROM);
    let tail = divide(horner(divide(k.zeros_like(c) + 1.0, c * c), &TAIL), c);
    k.where_(b.lt(ONE_FROM), erfcx_pieces(b.clamp(STARTS[0], ONE_FROM)), tail)
}

/// `b²` in two parts, `s + ds` exactly (the second by a fused multiply-add).
pub(super) fn square_parts(b: Value<'_>) -> (Value<'_>, Value<'_>) {
    let s = b * b;
    (s, b.fma(b, -s))
}

/// `e^-(s + ds)·r` (`ds` within an ulp of `s`): `e^(-s) = 2^k·(1 + p)`, and
/// `r·(1 + p)·(1 - ds) = r + r·u` with `u = p - ds·(1 + p)`, one fused multiply-add, the
/// power of two applied last, so that a subnormal result rounds once.
pub(super) fn times_gaussian<'b>((s, ds): (Value<'b>, Value<'b>), r: Value<'b>) -> Value<'b> {
    let (kf, p) = exp_reduced_within(-s, -800.0, 0.0);
    let u = p - ds * (p + 1.0);
    scale(r.fma(u, r), kf)
}

/// `erf(a)` for `0 ≤ a < 1`: `a + a·(P(a²) - 1)`.
pub(super) fn erf_small(a: Value<'_>) -> Value<'_> {
    a + a * horner(a * a, &SMALL)
}

pub(super) fn erf(x: Value<'_>) -> Value<'_> {
    let k = x.builder;
    let a = x.abs();
    let b = a.clamp(STARTS[1], ONE_FROM);
    let erfc = times_gaussian(square_parts(b), erfcx_pieces(b));
    let r = k.where_(a.lt(STARTS[1]), erf_small(a), 1.0 - erfc);
    let r = k.where_(a.ge(ONE_FROM), 1.0, r);
    // erf is odd: x's sign bit on the result (so that erf(-0) = -0); NaN stays NaN.
    let r = r.copysign(x);
    k.where_(x.isnan(), x, r)
}

/// `erfc(b)` for `b ≥ 0` whose square is `s + ds` exactly: `1 - erf(b)` below 1/2 (at
/// least 0.48, so no digit is lost), `e^-(s + ds)·erfcx(b)` up to 28, zero past it.
pub(super) fn erfc_positive<'b>(b: Value<'b>, square: (Value<'b>, Value<'b>)) -> Value<'b> {
    let k = b.builder;
    let r = times_gaussian(square, erfcx_from_half(b));
    let r = k.where_(b.lt(STARTS[0]), 1.0 - erf_small(b), r);
    k.where_(b.ge(ERFC_ZERO_FROM), 0.0, r)
}

/// `erfc x = 1 - erf x` without the cancellation; `erfc(-a) = 2 - erfc(a)`.
pub(super) fn erfc(x: Value<'_>) -> Value<'_> {
    let k = x.builder;
    let a = x.abs();
    let c = a.minimum(ERFC_ZERO_FROM);
    let r = erfc_positive(a, square_parts(c));
    let r = k.where_(x.lt(0.0), 2.0 - r, r);
    k.where_(x.isnan(), x, r)
}

/// From here `erfcx` is its asymptotic series.
const ASYMPTOTIC_FROM: f64 = 28.0;
/// `erfcx(z)·z·√π = Σ (-1)^n·(2n - 1)!!·t^n`, `t = 1/(2z²)`, to n = 8 (the next term below
/// 2^-60 from 28 on), highest first.
const ASYMPTOTIC: [f64; 9] = [2_027_025.0, -135_135.0, 10_395.0, -945.0, 105.0, -15.0, 3.0, -1.0, 1.0];

/// libdevice's `erfcx`, `e^(x²)·erfc(x)`: `e^(x²)·(1 - erf(x))` below 1/2 in magnitude
/// (`x²` in two parts), erfc's pieces and tail up to 28, the asymptotic series beyond (0 at
/// `+∞`), and `2·e^(x²) - erfcx(-x)` from -1/2 down (`+∞` once `e^(x²)` overflows).
pub(super) fn erfcx(x: Value<'_>) -> Value<'_> {
    let k = x.builder;
    let z = x.abs();
    let c = z.maximum(ASYMPTOTIC_FROM);
    let t = divide(k.zeros_like(c) + 0.5, c * c);
    let far = divide(horner(t, &ASYMPTOTIC) * (std::f64::consts::FRAC_2_SQRT_PI * 0.5), c);
    let positive = k.where_(z.lt(ASYMPTOTIC_FROM), erfcx_from_half(z), far);
    // e^(z²) with z² = s + ds: e^s·(1 + ds).
    let (s, ds) = square_parts(z.minimum(27.0));
    let gaussian = super::f64_math::exp(s);
    let gaussian = k.where_(gaussian.lt(f64::INFINITY), gaussian.fma(ds, gaussian), gaussian);
    let signed_erf = erf_small(z).copysign(x);
    let small = gaussian * (1.0 - signed_erf);
    // (e^(z²) overflows from 26.7 on: z is held at 27 there, where it is infinite too.)
    let negative = gaussian * 2.0 - positive;
    let r = k.where_(z.lt(STARTS[0]), small, k.where_(x.lt(0.0), negative, positive));
    k.where_(x.isnan(), x, r)
}
