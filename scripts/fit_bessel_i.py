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
import struct

import mpmath as mp

SPLIT = 4
DEGREE = 10
TAYLOR_TERMS = 15
mp.mp.dps = 40


def f32(v):
    """v rounded to the nearest f32."""
    return struct.unpack("f", struct.pack("f", float(v)))[0]


def g(order, t):
    x = mp.mpf(SPLIT) / t
    return mp.sqrt(x) * mp.exp(-x) * mp.besseli(order, x)


def tail(order):
    """g's interpolating polynomial in t, lowest first."""
    n = DEGREE + 1
    nodes = [mp.cos(mp.pi * (k + mp.mpf(1) / 2) / n) for k in range(n)]
    values = [g(order, (u + 1) / 2) for u in nodes]
    cheb = []
    for j in range(n):
        s = sum(values[k] * mp.cos(mp.pi * j * (k + mp.mpf(1) / 2) / n) for k in range(n))
        cheb.append(s / n if j == 0 else 2 * s / n)
    t_polys = [[mp.mpf(1)], [mp.mpf(0), mp.mpf(1)]]
    for j in range(2, n):
        up = [mp.mpf(0)] + [2 * c for c in t_polys[j - 1]]
        down = t_polys[j - 2] + [mp.mpf(0)] * (len(up) - len(t_polys[j - 2]))
        t_polys.append([a - b for a, b in zip(up, down)])
    in_u = [mp.mpf(0)] * n
    for j in range(n):
        for i, c in enumerate(t_polys[j]):
            in_u[i] += cheb[j] * c
    # u = 2t - 1.
    in_t = [mp.mpf(0)] * n
    for i, c in enumerate(in_u):
        for k in range(i + 1):
            in_t[k] += c * mp.binomial(i, k) * 2**k * (-1) ** (i - k)
    return in_t


def worst(order, coefficients):
    w = 0.0
    for i in range(1, 4001):
        t = f32(i / 4000)
        acc = coefficients[0]
        for c in coefficients[1:]:
            acc = f32(f32(acc * t) + c)
        want = g(order, t)
        w = max(w, abs((acc - want) / want))
    return w / 2**-24


def show(name, coefficients):
    print("const %s: [f32; %d] = [" % (name, len(coefficients)))
    for c in coefficients:
        print("    %r," % c)
    print("];")


def main():
    for order in (0, 1):
        taylor = [f32(mp.mpf(1) / (math.factorial(k) * math.factorial(k + order))) for k in range(TAYLOR_TERMS)]
        show("I%d_TAYLOR" % order, list(reversed(taylor)))
        coefficients = [f32(c) for c in reversed(tail(order))]
        show("I%d_TAIL" % order, coefficients)
        print("// I%d's tail in f32: %.2f units of 2^-24" % (order, worst(order, coefficients)))


if __name__ == "__main__":
    main()
