#!/usr/bin/env python3
"""The polynomials of core-ir/src/builder/f64_inverse_trig.rs, f64's atan and asin on their
reduced arguments:

- atan(t) = t + t·z·G(z), z = t², for |t| ≤ 7/16: G(z) = (atan(√z) - √z) / (z·√z)
  (G(0) = -1/3), interpolated at the 12 Chebyshev points of z in [0, (7/16)²];
- asin(t) = t + t·z·P(z) for |t| ≤ 1/2: P(z) = (asin(√z) - √z) / (z·√z) (P(0) = 1/6),
  at the 14 Chebyshev points of z in [0, 1/4].

Each in 40-digit arithmetic, rounded to f64; the script prints the coefficients highest
first, as the Rust constants hold them, and the largest error of t + t·z·Q(z) relative to
the function over 2001 points, Q evaluated by Horner's rule in f64.

Needs mpmath (`pip install mpmath`). Run: python3 scripts/fit_inverse_trig_f64.py
"""
import mpmath as mp

from chebyshev import interpolate

mp.mp.dps = 40


def odd_rest(f, at_zero):
    """(f(√z) - √z) / (z·√z), with its limit at 0."""

    def q(z):
        if z == 0:
            return at_zero
        t = mp.sqrt(z)
        return (f(t) - t) / (z * t)

    return q


def fit(name, f, at_zero, degree, top):
    q = odd_rest(f, at_zero)
    coefficients = [float(c) for c in reversed(interpolate(q, degree, 0, top))]
    print("const %s: [f64; %d] = [" % (name, len(coefficients)))
    for c in coefficients:
        print("    %r," % c)
    print("];")
    worst = 0
    for i in range(1, 2001):
        z = top * i / 2000
        acc = coefficients[0]
        for c in coefficients[1:]:
            acc = acc * float(z) + c
        t = mp.sqrt(z)
        worst = max(worst, abs(t * z * (acc - q(z))) / f(t))
    print("// largest relative error: %s" % mp.nstr(worst, 3))


fit("ATAN_G", mp.atan, mp.mpf(-1) / 3, 11, (mp.mpf(7) / 16) ** 2)
fit("ASIN_P", mp.asin, mp.mpf(1) / 6, 13, mp.mpf(1) / 4)
