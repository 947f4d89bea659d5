#!/usr/bin/env python3
"""The polynomials of core-ir/src/builder/bessel.rs: the modified Bessel functions I0 and I1.

Below 4 each is its Taylor series in y = x²/4: I0 = Σ y^k/(k!)², I1 = (x/2)·Σ y^k/(k!(k+1)!),
15 terms (the last below 10^-16 of the sum at 4). From 4 on, g(t) = √x·e^-x·I(x) with
t = 4/x in (0, 1] is interpolated at the 11 Chebyshev points of [0, 1] in 40-digit
arithmetic (g is smooth there: its asymptotic series in 1/x, and e^-2x terms, flat at
t = 0) and turned into monomial coefficients in t. Coefficients are rounded to f32 and
printed highest first, as the Rust constants hold them, with the largest relative error
of each tail polynomial evaluated by Horner's rule in f32 (in units of 2^-24).

Needs mpmath (`pip install mpmath`). Run: python3 scripts/fit_bessel_i.py
"""
import math

import mpmath as mp

from chebyshev import f32, horner_f32, interpolate, show

SPLIT = 4
DEGREE = 10
TAYLOR_TERMS = 15
mp.mp.dps = 40


def g(order, t):
    x = mp.mpf(SPLIT) / t
    return mp.sqrt(x) * mp.exp(-x) * mp.besseli(order, x)


def tail(order):
    """g's interpolating polynomial in t on [0, 1], lowest first."""
    return interpolate(lambda t: g(order, t), DEGREE, 0, 1)


def worst(order, coefficients):
    w = 0.0
    for i in range(1, 4001):
        t = f32(i / 4000)
        want = g(order, t)
        w = max(w, abs((horner_f32(coefficients, t) - want) / want))
    return w / 2**-24


def main():
    for order in (0, 1):
        taylor = [f32(mp.mpf(1) / (math.factorial(k) * math.factorial(k + order))) for k in range(TAYLOR_TERMS)]
        show("I%d_TAYLOR" % order, list(reversed(taylor)))
        coefficients = [f32(c) for c in reversed(tail(order))]
        show("I%d_TAIL" % order, coefficients)
        print("// I%d's tail in f32: %.2f units of 2^-24" % (order, worst(order, coefficients)))


if __name__ == "__main__":
    main()
