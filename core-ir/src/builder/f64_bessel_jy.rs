//! libdevice's `j0`, `j1`, `y0` and `y1` of f64 values, written out in f64 ops
//! (bessel_jy.rs routes f64 here): PTX has no f64 Bessel function and bessel_jy.rs's
//! polynomials hold f32's precision only.
//!
//! Below 2, the series in `y = x²/4` of bessel_jy.rs's f32 form to `y^14` (terms below
//! 10^-20), with `y`'s rounding error taken back through the series' slope, and `J0` as
//! `(1 - y) + y²·R(y)`, whose first part is exact; `ln(x/2)` is `ln x` less `ln 2` in two
//! parts, so that subnormal `x` keep their digits. From 2 on, `J_n = M_n·cos θ_n` and `Y_n =
//! M_n·sin θ_n` with `M_n = G_n(1/x)/√x` and `θ_n = x - (2n+1)π/4 + φ_n(1/x)`: `G_n` and
//! `φ_n` are polynomials in `1/x` on [2, 4] and [4, 8] and in `1/x²` from 8 on
//! (`scripts/fit_bessel_f64.py` fits them). `x` is reduced by π/2 exactly (reduce_pi.rs),
//! and the rest, plus `φ_n`, less `π/4` (in two parts) is summed exactly before its sine
//! and cosine, so that the phase has an absolute error near 2^-56 for every finite `x`:
//! next to the functions' zeros the results have an absolute error of a few 10^-17 times
//! `M_n`, as libdevice's, and a few ulp elsewhere. `core-ir/tests/f64_bessel.rs` measures
//! them against the libm crate's (musl's).

use super::bessel_jy::Kind;
use super::f64_math::{divide, log, sqrt, two_sum};
use super::f64_trig::sin_cos_of;
use super::in_f32::horner;
use super::sincos::quarter_turns;
use super::{KernelBuilder, Value};

/// Where the series hand over to the modulus and phase.
const SPLIT: f64 = 2.0;
/// Where the second piece of the modulus and phase starts, and the tail in `1/x²`.
const SECOND_PIECE: f64 = 4.0;
const TAIL_FROM: f64 = 8.0;
/// The pieces' centres in `t = 1/x`.
const CENTRES: [f64; 2] = [0.375, 0.1875];
/// The series' terms: `y^14/(14!)²` is below 10^-21 at `y = 1`.
const TERMS: usize = 15;
/// `γ - ln 2`, `-ln 2`, `π/4` and `2/π`, each in two parts (the nearest f64 and the nearest
/// f64 to the rest).
#[allow(clippy::excessive_precision)]
const EULER_GAMMA_LESS_LN_2: [f64; 2] = [-0.11593151565841245, -3.7780767526472776e-19];
const MINUS_LN_2: [f64; 2] = [-std::f64::consts::LN_2, -2.3190468138462996e-17];
const FRAC_PI_4: [f64; 2] = [std::f64::consts::FRAC_PI_4, 3.061616997868383e-17];
const FRAC_2_PI: [f64; 2] = [std::f64::consts::FRAC_2_PI, -3.935735335036497e-17];

impl KernelBuilder {
    /// `J_order(x)` or `Y_order(x)` (order 0 or 1) for f64 `x`, special values included.
    pub(super) fn f64_bessel<'b>(&'b self, order: u32, kind: Kind, x: Value<'b>) -> Value<'b> {
        let a = x.abs();
        let near = series(order, kind, self.where_(a.lt(SPLIT), a, 1.0));
        // Infinities told by their bits (`isinf`): NVIDIA's Vulkan driver (580 on an H200)
        // gave `j1(-inf)` as `-j1(2)`, the select on `|x| == inf` lost.
        let far = self.modulus_phase(order, kind, self.where_(a.ge(SPLIT) & x.isfinite(), a, SPLIT));
        let r = self.where_(a.lt(SPLIT), near, far);
        let r = self.where_(x.isinf(), 0.0, r);
        match (kind, order) {
            (Kind::First, 0) => self.where_(x.isnan(), x, r),
            // J1 is odd: x's sign (J1(±0) = ±0).
            (Kind::First, _) => {
                let r = self.where_(a.eq(0.0), 0.0, r);
                let r = self.where_(x.signbit(), -r, r);
                self.where_(x.isnan(), x, r)
            }
            (Kind::Second, _) => {
                let r = self.where_(a.eq(0.0), f64::NEG_INFINITY, r);
                self.where_(x.lt(0.0) | x.isnan(), f64::NAN, r)
            }
        }
    }

    /// `M·cos θ` or `M·sin θ` for f64 `a` in `[2, ∞)`, finite.
    fn modulus_phase<'b>(&'b self, order: u32, kind: Kind, a: Value<'b>) -> Value<'b> {
        let (pieces, tail) = match order {
            0 => ((&MODULUS_0, &PHASE_0), (&MODULUS_0_TAIL, &PHASE_0_TAIL)),
            _ => ((&MODULUS_1, &PHASE_1), (&MODULUS_1_TAIL, &PHASE_1_TAIL)),
        };
        let t = divide(self.zeros_like(a) + 1.0, a);
        // The piece's coefficients chosen by `a` before one Horner evaluation.
        let first = a.lt(SECOND_PIECE);
        let pick = |rows: &[[f64; 17]; 2]| -> Vec<Value<'b>> {
            (0..17)
                .map(|i| self.where_(first, self.zeros_like(a) + rows[0][i], rows[1][i]))
                .collect()
        };
        let u = t - self.where_(first, self.zeros_like(a) + CENTRES[0], CENTRES[1]);
        let s = t * t;
        let far = a.ge(TAIL_FROM);
        let g = self.where_(far, horner(s, tail.0), horner(u, &pick(pieces.0)));
        let phi = self.where_(far, t * horner(s, tail.1), horner(u, &pick(pieces.1)));
        let m = divide(g, sqrt(a));
        // a = q·π/2 + y + dy, so θ = (q - order)·π/2 + (y + φ - π/4) + dy: y + φ summed
        // exactly, then less π/4, or plus π/4 a quadrant lower where the sum is negative,
        // so that the rest stays within π/4.
        let (q, y, dy) = self.reduce_f64_by_half_pi(a);
        let (s_hi, s_lo) = two_sum(y, phi);
        let below = s_hi.lt(0.0);
        let [quarter_hi, quarter_lo] = FRAC_PI_4;
        let c_hi = self.where_(below, self.zeros_like(a) + quarter_hi, -quarter_hi);
        let c_lo = self.where_(below, self.zeros_like(a) + quarter_lo, -quarter_lo);
        let (w_hi, e) = two_sum(s_hi, c_hi);
        let w_lo = e + ((s_lo + dy) + c_lo);
        let w = w_hi + w_lo;
        let w_lo = w_lo - (w - w_hi);
        let (sin, cos) = sin_cos_of(w, w_lo);
        let quadrant = self.where_(below, q + (3 - order) as u64, q + (4 - order) as u64);
        m * match kind {
            Kind::First => quarter_turns(quadrant + 1u64, sin, cos),
            Kind::Second => quarter_turns(quadrant, sin, cos),
        }
    }
}

fn factorial(n: usize) -> f64 {
    (1..=n).map(|i| i as f64).product()
}

/// `(-1)^n`.
fn alternate(n: usize) -> f64 {
    if n % 2 == 0 {
        1.0
    } else {
        -1.0
    }
}

/// The series' coefficients `c(n, H)` for `n` from `from` below [`TERMS`] (with the
/// harmonic numbers `H`), highest first.
fn coefficients(from: usize, c: impl Fn(usize, &[f64]) -> f64) -> Vec<f64> {
    let mut h = vec![0.0f64; TERMS + 2];
    for n in 1..h.len() {
        h[n] = h[n - 1] + 1.0 / n as f64;
    }
    (from..TERMS).rev().map(|n| c(n, &h)).collect()
}

/// The slope of the series `Σ c_n·y^n`, `c` highest first from `n = 0`: its coefficients,
/// highest first.
fn slope(c: &[f64]) -> Vec<f64> {
    let n = c.len() - 1;
    c[..n].iter().enumerate().map(|(i, &v)| v * (n - i) as f64).collect()
}

/// `Σ c_n·(y + dy)^n` to first order in `dy`.
fn series_at<'b>(y: Value<'b>, dy: Value<'b>, c: &[f64]) -> Value<'b> {
    horner(y, c) + horner(y, &slope(c)) * dy
}

/// The series below 2 for `0 < a < 2` (A&S 9.1.10, 9.1.11), in `y = a²/4` (`y + dy`
/// exactly): `J0 = Σ (-y)^k/(k!)²`, `J1 = (a/2)·Σ (-y)^k/(k!(k+1)!)`,
/// `Y0 = (2/π)·((ln(a/2) + γ)·J0 + Σ (-1)^(k+1) H_k y^k/(k!)²)`,
/// `Y1 = -2/(πa) + (2/π)·(ln(a/2)·J1 - (a/4)·Σ (-y)^k (ψ(k+1) + ψ(k+2))/(k!(k+1)!))`.
fn series(order: u32, kind: Kind, a: Value<'_>) -> Value<'_> {
    let half = a * 0.5;
    let y = half * half;
    let dy = half.fma(half, -y);
    let j = match order {
        0 => {
            // (1 - y) is exact where it matters (y ≥ 1/2); y²·R(y) holds the rest.
            let all = coefficients(0, |n, _| alternate(n) / (factorial(n) * factorial(n)));
            let rest = horner(y, &all[..TERMS - 2]);
            (1.0 - y) + ((y * y) * rest + horner(y, &slope(&all)) * dy)
        }
        _ => {
            half * series_at(
                y,
                dy,
                &coefficients(0, |n, _| alternate(n) / (factorial(n) * factorial(n + 1))),
            )
        }
    };
    if kind == Kind::First {
        return j;
    }
    let ln_a = log(a);
    let [two_over_pi, two_over_pi_lo] = FRAC_2_PI;
    match order {
        0 => {
            let [c_hi, c_lo] = EULER_GAMMA_LESS_LN_2;
            let l = (ln_a + c_hi) + c_lo;
            // y·P(y), P's first coefficient H_1 = 1, with dy through (y·P)' = P + y·P'.
            let p = coefficients(1, |n, h| -alternate(n) * h[n] / (factorial(n) * factorial(n)));
            let at = horner(y, &p);
            let sum = y * at + dy * (at + y * horner(y, &slope(&p)));
            (l * j + sum) * two_over_pi
        }
        _ => {
            let [c_hi, c_lo] = MINUS_LN_2;
            let l = (ln_a + c_hi) + c_lo;
            // ψ(k + 1) + ψ(k + 2) = H_k + H_(k+1) - 2γ.
            let gamma = 0.577_215_664_901_532_9f64;
            let psi = |n: usize, h: &[f64]| h[n] + h[n + 1] - 2.0 * gamma;
            let sum = series_at(
                y,
                dy,
                &coefficients(0, |n, h| alternate(n) * psi(n, h) / (factorial(n) * factorial(n + 1))),
            );
            // -2/(πa) as (2/π)'s two parts over a, so that it overflows only where it does.
            let pole = divide(a.builder.zeros_like(a) + two_over_pi, a) + two_over_pi_lo / a;
            (l * j - (a * 0.25) * sum) * two_over_pi - pole
        }
    }
}

// The modulus and phase polynomials (`scripts/fit_bessel_f64.py`): `G_n = √x·M_n` and
// `φ_n` in `1/x` less the piece's centre on [2, 4] and [4, 8], and from 8 on `G_n` and
// `φ_n·x` in `1/x²`, highest first.
#[allow(clippy::excessive_precision)]
const MODULUS_0: [[f64; 17]; 2] = [
    [
        -0.9747816829050002,
        0.8184681136978362,
        -0.4927822735133886,
        0.2651993945325299,
        -0.11022472085086435,
        0.016745407782965013,
        0.029596283581000915,
        -0.0447038843485032,
        0.04146227663089309,
        -0.02899545141906283,
        0.013201751872235993,
        0.0023566897099575176,
        -0.01545190950646837,
        0.02379341357049372,
        -0.021100755112196595,
        -0.027757380535762006,
        0.7919321875463311,
    ],
    [
        456.4799874261009,
        -237.87173769078575,
        78.74824684021708,
        -16.83123453883527,
        -0.9884776984878288,
        3.377654537842472,
        -2.098061177031494,
        0.8018753205177009,
        -0.1254094470814857,
        -0.09944384070463029,
        0.1107308267941391,
        -0.05587110732900338,
        0.0009289693024997571,
        0.03250386135075756,
        -0.03744881791526258,
        -0.016943692911703435,
        0.7962192745955551,
    ],
];
#[allow(clippy::excessive_precision)]
const PHASE_0: [[f64; 17]; 2] = [
    [
        -1.5151629217729485,
        0.5315960301873847,
        0.06404324309998291,
        -0.1972347699695613,
        0.20066068604201262,
        -0.15571688083177299,
        0.09750192026521319,
        -0.04554713449629116,
        0.0072960192568566114,
        0.01623947947959846,
        -0.026780237559206905,
        0.026680453203770747,
        -0.017645251509508093,
        -0.0005302086227839194,
        0.03312592463437078,
        -0.10729974733872202,
        -0.044305100069929944,
    ],
    [
        655.8278832069424,
        -86.153396196221,
        -45.11705262477301,
        35.04204754295108,
        -15.707931834394353,
        4.705892383960717,
        -0.4229776861247424,
        -0.602958733404639,
        0.5149313978424708,
        -0.23307272558674275,
        0.03568794415747741,
        0.04864598252392232,
        -0.05707585694007311,
        0.025906069079447244,
        0.02740011421025523,
        -0.11910707907678902,
        -0.023047575509207493,
    ],
];
#[allow(clippy::excessive_precision)]
const MODULUS_0_TAIL: [f64; 14] = [
    -22076782195007.562,
    2748613356785.729,
    -160351922511.3535,
    5945472196.984524,
    -163392740.2282872,
    3802537.9933019327,
    -87358.40113166836,
    2346.7489134342245,
    -85.2249887040545,
    4.6664812164609835,
    -0.4331288668585536,
    0.08259351891980186,
    -0.04986778505016266,
    0.7978845608028654,
];
#[allow(clippy::excessive_precision)]
const PHASE_0_TAIL: [f64; 14] = [
    237820276675437.06,
    -29346433050910.797,
    1689380161809.8223,
    -61341049905.611664,
    1628867238.5120785,
    -35791913.76131761,
    749464.7236731474,
    -17583.436259274917,
    534.9568580609412,
    -23.4738936327731,
    1.6380645154676996,
    -0.20957031169394386,
    0.06510416666647652,
    -0.12499999999999999,
];
#[allow(clippy::excessive_precision)]
const MODULUS_1: [[f64; 17]; 2] = [
    [
        0.9457959259671967,
        -0.923178250314462,
        0.6313489879033223,
        -0.37867148953565555,
        0.18779585552243772,
        -0.0602512987145361,
        -0.013752303133885703,
        0.04875344693662203,
        -0.057919072830038054,
        0.05095240596338002,
        -0.03372186305408218,
        0.008668630245180933,
        0.023872628794436235,
        -0.06181454621355084,
        0.08655487138383426,
        0.09216697148070838,
        0.816780417518252,
    ],
    [
        -477.22251988193796,
        277.6023137052003,
        -101.32577158564838,
        25.180110851615982,
        -0.8788339580489221,
        -3.6209532098268364,
        2.666460134773571,
        -1.179567757928083,
        0.2746051575741847,
        0.0939135860334236,
        -0.16431187660975632,
        0.11028338333511273,
        -0.01992138792416023,
        -0.06911464904241776,
        0.12483296918336206,
        0.052680307700596264,
        0.802975038337821,
    ],
];
#[allow(clippy::excessive_precision)]
const PHASE_1: [[f64; 17]; 2] = [
    [
        2.166337832158263,
        -0.9325988290263562,
        0.10152706007982444,
        0.14491429238710174,
        -0.21231044694219836,
        0.19896730292827944,
        -0.14992770423807264,
        0.0929922850230217,
        -0.04078334936634018,
        -0.002818573459565773,
        0.0371394779176294,
        -0.05951988366059357,
        0.059957143617513274,
        -0.016937906279775726,
        -0.10151825618779102,
        0.32521895011018725,
        0.1336495121007374,
    ],
    [
        -872.2373325882542,
        151.33466696220816,
        38.31175668666376,
        -39.61320162380336,
        20.087529757693343,
        -7.001128932406222,
        1.2050183691554575,
        0.5480330376675749,
        -0.6895880885619775,
        0.40277887675997204,
        -0.11847502730643475,
        -0.059771861397998914,
        0.12768278105293865,
        -0.0867696128391058,
        -0.07480891214142503,
        0.3595051663754867,
        0.06930304437287509,
    ],
];
#[allow(clippy::excessive_precision)]
const MODULUS_1_TAIL: [f64; 14] = [
    24841756468269.176,
    -3096429361651.225,
    180962987969.02814,
    -6728972294.717598,
    185837573.47229788,
    -4362814.851349824,
    101771.26787463643,
    -2803.218886562975,
    105.86359393210638,
    -6.175471730933133,
    0.6425345912543233,
    -0.15427845992137737,
    0.14960335515051892,
    0.7978845608028654,
];
#[allow(clippy::excessive_precision)]
const PHASE_1_TAIL: [f64; 14] = [
    -267432458028248.88,
    33036080856845.133,
    -1904888957093.5083,
    69347297883.05344,
    -1849646796.3582385,
    40961954.71083606,
    -869584.0148249493,
    20873.844529106555,
    -658.4238029627008,
    30.622636703760193,
    -2.369396319917361,
    0.3708984366011575,
    -0.16406249999978792,
    0.375,
];
