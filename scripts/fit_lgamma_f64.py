#!/usr/bin/env python3
"""The polynomials and constants of core-ir/src/builder/f64_gamma.rs, f64's lgamma and tgamma.

- `lgamma(t + 2) = (t + 1)·t·R(t)` on [-1, 1], as fit_lgamma.py's f32 fit: R(t) =
  lgamma(t + 2) / ((t + 1)·t), whose singularities at t = -1 and 0 are removable (R(-1) = γ,
  R(0) = 1 - γ), interpolated at the 29 Chebyshev points of [-1, 1]; printed as its
  constant term `R0` in two parts and the rest `R(t) - R0 = t·P(t)`, P's coefficients
  highest first (the Rust adds the two as a sum of two f64s, so that R's last rounding is
  not the result's);
- Stirling's remainder from 8 on: `lgamma(y) - ((y - 1/2)·ln y - y + ln(2π)/2) = s·Q(s²)`,
  s = 1/y, Q(0) = 1/12, interpolated at the 8 Chebyshev points of s² in [0, 1/64] (the
  asymptotic series would need 12 terms there for the same error);
- `ln π`, `ln(2π)/2 - 1/2` and `ln 2` as the nearest f64 and the nearest f64 to the rest.

Each in 50-digit arithmetic, rounded to f64; the script prints them highest first, as the
Rust constants hold them, and the largest error of each evaluated by Horner's rule in f64
over 4001 points: R's relative to R (`t·P(t)` in f64, added to R0 exactly), s·Q's absolute (in units of 2^-60: the remainder is
added to values from 8.1 up, whose ulp is 2^-49 or more).

Needs mpmath (`pip install mpmath`). Run: python3 scripts/fit_lgamma_f64.py
"""
import mpmath as mp

from chebyshev import interpolate
from fit_lgamma import r

mp.mp.dps = 50
R_DEGREE = 28
STIRLING_FROM = 8
Q_DEGREE = 7


def q(z):
    if z < mp.mpf(10) ** -40:
        return mp.mpf(1) / 12
    y = 1 / mp.sqrt(z)
    return y * (mp.loggamma(y) - ((y - mp.mpf(1) / 2) * mp.log(y) - y + mp.log(2 * mp.pi) / 2))


def horner(coefficients, v):
    """f64 coefficients (highest first) at f64 `v` by Horner's rule in f64."""
    acc = coefficients[0]
    for c in coefficients[1:]:
        acc = acc * v + c
    return acc


def show(name, coefficients):
    print("const %s: [f64; %d] = [" % (name, len(coefficients)))
    for c in coefficients:
        print("    %r," % c)
    print("];")


def parts(name, v):
    hi = float(v)
    lo = float(v - hi)
    print("const %s: [f64; 2] = [%r, %r];" % (name, hi, lo))


def main():
    fit = interpolate(r, R_DEGREE)
    rs = [float(c) for c in reversed(fit[1:])]
    show("R", rs)
    parts("R0", fit[0])
    r0 = float(fit[0])
    r0_lo = float(fit[0] - r0)
    e = 0
    for i in range(4001):
        t = float(-1 + mp.mpf(i) / 2000)
        # As the Rust evaluates it: R0 (in two parts) + t·P(t), the sum exact in mpmath.
        v = t * horner(rs, t)
        e = max(e, abs((mp.mpf(r0) + r0_lo + v) / r(t) - 1))
    print("// largest relative error of R: %s (%.3f units of 2^-53)" % (mp.nstr(e, 3), e / 2**-53))

    top = mp.mpf(1) / STIRLING_FROM**2
    qs = [float(c) for c in reversed(interpolate(q, Q_DEGREE, 0, top))]
    show("STIRLING", qs)
    e = 0
    for i in range(4001):
        y = float(STIRLING_FROM / (1 - mp.mpf(i) / 4001 * mp.mpf(0.999)))
        s = 1 / y
        e = max(e, abs(s * horner(qs, s * s) - mp.sqrt(mp.mpf(s) ** 2) * q(mp.mpf(s) ** 2)))
    print("// largest absolute error of s·Q(s²): %s (%.3f units of 2^-60)" % (mp.nstr(e, 3), e / 2**-60))

    parts("LN_PI", mp.log(mp.pi))
    parts("HALF_LN_2PI_LESS_HALF", mp.log(2 * mp.pi) / 2 - mp.mpf(1) / 2)
    parts("LN_2", mp.log(2))


if __name__ == "__main__":
    main()
