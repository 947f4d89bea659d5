#!/usr/bin/env python3
"""The polynomial R of core-ir/src/builder/gamma.rs: lgamma(t + 2) = (t + 1)·t·R(t) on [-1, 1].

R(t) = lgamma(t + 2) / ((t + 1)·t), whose singularities at t = -1 and 0 are removable
(R(-1) = γ, R(0) = 1 - γ), is interpolated at the 13 Chebyshev points of [-1, 1] in
50-digit arithmetic, turned into monomial coefficients and rounded to f32. The script
prints them highest first, as the Rust constant holds them, and the largest relative error
of R evaluated by Horner's rule in f32 over 20001 points (in units of 2^-24).

Needs mpmath (`pip install mpmath`). Run: python3 scripts/fit_lgamma.py
"""
import mpmath as mp

from chebyshev import f32, horner_f32, interpolate, show

DEGREE = 12
mp.mp.dps = 50


def r(t):
    t = mp.mpf(t)
    # The middle Chebyshev point is 0 up to cos's rounding, where t + 2 rounds to 2.
    if abs(t + 1) < mp.mpf(10) ** -40:
        return +mp.euler
    if abs(t) < mp.mpf(10) ** -40:
        return 1 - mp.euler
    return mp.loggamma(t + 2) / ((t + 1) * t)


def main():
    coefficients = [f32(c) for c in reversed(interpolate(r, DEGREE))]
    worst = 0.0
    for i in range(20001):
        t = f32(-1 + 2 * i / 20000)
        want = r(t)
        worst = max(worst, abs((horner_f32(coefficients, t) - want) / want))
    show("R", coefficients)
    print("// largest relative error in f32: %.2f units of 2^-24" % (worst / 2**-24))


if __name__ == "__main__":
    main()
