#!/usr/bin/env python3
"""The polynomials and constants of core-ir/src/builder/f64_bessel_jy.rs and
f64_bessel_i.rs, f64's Bessel functions.

- `J_n = M_n·cos θ_n`, `Y_n = M_n·sin θ_n` (n = 0, 1) from 2 on, with the modulus
  `M_n = √(J_n² + Y_n²)` and the phase `θ_n = x - (2n+1)π/4 + φ_n(x)`: `G_n = √x·M_n` and
  `φ_n` interpolated at the 17 Chebyshev points of `t = 1/x` in [1/4, 1/2] and [1/8, 1/4]
  (x from 2 to 4 and from 4 to 8), as polynomials in `t` less the interval's centre; from
  8 on, `G_n` and `φ_n/t` at the 14 Chebyshev points of `s = t²` in [0, 1/64], as
  polynomials in `s` (their limits at 0 are √(2/π) and (4n² - 1)/8; neither has an
  exponentially small part that a polynomial misses at this precision, which the printed
  errors check).
- `I_n(x) = e^x/√x·H_n(1/x)` (n = 0, 1) from 10 on: `H_n` interpolated at the 21 Chebyshev
  points of `t = 1/x` in [0, 1/10], as a polynomial in `t - 1/20`.
- `γ - ln 2` and `π/4` in two parts (the nearest f64 and the nearest f64 to the rest).

Each in 40-digit arithmetic, rounded to f64; the script prints them highest first, as the
Rust constants hold them, and the largest error of each evaluated by Horner's rule in f64
over 2001 points, relative to the function (to `φ_n`'s size for the phases).

Needs mpmath (`pip install mpmath`). Run: python3 scripts/fit_bessel_f64.py
"""
import mpmath as mp

from chebyshev import interpolate

mp.mp.dps = 40
PIECES = [(2, 4), (4, 8)]
PIECE_DEGREE = 16
TAIL_FROM = 8
TAIL_DEGREE = 13
I_FROM = 10
I_DEGREE = 20


def modulus_phase(n, x):
    """`(√x·M_n(x), φ_n(x))`."""
    j, y = mp.besselj(n, x), mp.bessely(n, x)
    phase = mp.atan2(y, j) - x + (2 * n + 1) * mp.pi / 4
    phase -= 2 * mp.pi * mp.nint(phase / (2 * mp.pi))
    return mp.sqrt(x) * mp.sqrt(j * j + y * y), phase


def horner(coefficients, v):
    """f64 coefficients (highest first) at f64 `v` by Horner's rule in f64."""
    acc = coefficients[0]
    for c in coefficients[1:]:
        acc = acc * v + c
    return acc


def fit(f, degree, lo, hi, centre):
    """`f` interpolated on [lo, hi] in the variable less `centre`, f64, highest first, and
    its largest relative error."""
    lo, hi, centre = mp.mpf(lo), mp.mpf(hi), mp.mpf(centre)
    c = [float(v) for v in reversed(interpolate(lambda d: f(d + centre), degree, lo - centre, hi - centre))]
    e = 0
    for i in range(2001):
        v = lo + (hi - lo) * i / 2000
        d = float(v - centre)
        want = f(mp.mpf(d) + centre)
        e = max(e, abs((horner(c, d) - want) / want))
    return c, e


def show(name, rows):
    print("#[allow(clippy::excessive_precision)]")
    if isinstance(rows[0], list):
        print("const %s: [[f64; %d]; %d] = [" % (name, len(rows[0]), len(rows)))
        for row in rows:
            print("    [")
            for c in row:
                print("        %r," % c)
            print("    ],")
    else:
        print("const %s: [f64; %d] = [" % (name, len(rows)))
        for c in rows:
            print("    %r," % c)
    print("];")


def two_parts(name, v):
    hi = float(v)
    lo = float(v - mp.mpf(hi))
    print("const %s: [f64; 2] = [%r, %r];" % (name, hi, lo))


for n in (0, 1):
    moduli, phases = [], []
    for lo_x, hi_x in PIECES:
        lo, hi = mp.mpf(1) / hi_x, mp.mpf(1) / lo_x
        centre = (lo + hi) / 2
        g, eg = fit(lambda t: modulus_phase(n, 1 / t)[0], PIECE_DEGREE, lo, hi, centre)
        p, ep = fit(lambda t: modulus_phase(n, 1 / t)[1], PIECE_DEGREE, lo, hi, centre)
        moduli.append(g)
        phases.append(p)
        print("// order %d, x in [%s, %s], t less %s: G %s, φ %s" % (n, lo_x, hi_x, float(centre), mp.nstr(eg, 3), mp.nstr(ep, 3)))
    show("MODULUS_%d" % n, moduli)
    show("PHASE_%d" % n, phases)

    def g_tail(s):
        return mp.sqrt(2 / mp.pi) if s == 0 else modulus_phase(n, 1 / mp.sqrt(s))[0]

    def p_tail(s):
        return mp.mpf(4 * n * n - 1) / 8 if s == 0 else modulus_phase(n, 1 / mp.sqrt(s))[1] * mp.sqrt(1 / s)

    g, eg = fit(g_tail, TAIL_DEGREE, 0, mp.mpf(1) / TAIL_FROM**2, 0)
    p, ep = fit(p_tail, TAIL_DEGREE, 0, mp.mpf(1) / TAIL_FROM**2, 0)
    print("// order %d, x from %d, in s = 1/x²: G %s, φ/t %s" % (n, TAIL_FROM, mp.nstr(eg, 3), mp.nstr(ep, 3)))
    show("MODULUS_%d_TAIL" % n, g)
    show("PHASE_%d_TAIL" % n, p)

for n in (0, 1):

    def h(t):
        if t > mp.mpf(1) / 1000:
            return mp.sqrt(1 / t) * mp.exp(-1 / t) * mp.besseli(n, 1 / t)
        # Past 1000 (and at 0) the asymptotic series, its terms falling below 10^-40.
        mu, term, total = 4 * n * n, mp.mpf(1), mp.mpf(0)
        for k in range(1, 30):
            total += term
            term *= -(mu - (2 * k - 1) ** 2) * t / (8 * k)
        return total / mp.sqrt(2 * mp.pi)

    c, e = fit(h, I_DEGREE, 0, mp.mpf(1) / I_FROM, mp.mpf(1) / (2 * I_FROM))
    print("// I%d from %d, in t = 1/x less %s: %s" % (n, I_FROM, 1 / (2 * I_FROM), mp.nstr(e, 3)))
    show("I%d_TAIL" % n, c)

two_parts("EULER_GAMMA_LESS_LN_2", mp.euler - mp.log(2))
two_parts("FRAC_PI_4", mp.pi / 4)
two_parts("LN_2", mp.log(2))
two_parts("FRAC_2_PI", 2 / mp.pi)
