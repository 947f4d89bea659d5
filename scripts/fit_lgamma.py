#!/usr/bin/env python3
"""The polynomial R of core-ir/src/builder/gamma.rs: lgamma(t + 2) = (t + 1)·t·R(t) on [-1, 1].

R(t) = lgamma(t + 2) / ((t + 1)·t), whose singularities at t = -1 and 0 are removable
(R(-1) = γ, R(0) = 1 - γ), is interpolated at the 13 Chebyshev points of [-1, 1] in
50-digit arithmetic, turned into monomial coefficients and rounded to f32. The script
prints them highest first, as the Rust constant holds them, and the largest relative error
of R evaluated by Horner's rule in f32 over 20001 points (in units of 2^-24).

Needs mpmath (`pip install mpmath`). Run: python3 scripts/fit_lgamma.py
"""
import struct

import mpmath as mp

DEGREE = 12
mp.mp.dps = 50


def f32(v):
    """v rounded to the nearest f32."""
    return struct.unpack("f", struct.pack("f", float(v)))[0]


def r(t):
    t = mp.mpf(t)
    # The middle Chebyshev point is 0 up to cos's rounding, where t + 2 rounds to 2.
    if abs(t + 1) < mp.mpf(10) ** -40:
        return +mp.euler
    if abs(t) < mp.mpf(10) ** -40:
        return 1 - mp.euler
    return mp.loggamma(t + 2) / ((t + 1) * t)


def monomial_coefficients():
    n = DEGREE + 1
    nodes = [mp.cos(mp.pi * (k + mp.mpf(1) / 2) / n) for k in range(n)]
    values = [r(t) for t in nodes]
    cheb = []
    for j in range(n):
        s = sum(values[k] * mp.cos(mp.pi * j * (k + mp.mpf(1) / 2) / n) for k in range(n))
        cheb.append(s / n if j == 0 else 2 * s / n)
    # T_j as monomial coefficients, lowest first.
    t_polys = [[mp.mpf(1)], [mp.mpf(0), mp.mpf(1)]]
    for j in range(2, n):
        up = [mp.mpf(0)] + [2 * c for c in t_polys[j - 1]]
        down = t_polys[j - 2] + [mp.mpf(0)] * (len(up) - len(t_polys[j - 2]))
        t_polys.append([a - b for a, b in zip(up, down)])
    mono = [mp.mpf(0)] * n
    for j in range(n):
        for i, c in enumerate(t_polys[j]):
            mono[i] += cheb[j] * c
    return mono


def main():
    coefficients = [f32(c) for c in reversed(monomial_coefficients())]
    worst = 0.0
    for i in range(20001):
        t = f32(-1 + 2 * i / 20000)
        acc = coefficients[0]
        for c in coefficients[1:]:
            acc = f32(f32(acc * t) + c)
        want = r(t)
        worst = max(worst, abs((acc - want) / want))
    print("const R: [f32; %d] = [" % len(coefficients))
    for c in coefficients:
        print("    %r," % c)
    print("];")
    print("// largest relative error in f32: %.2f units of 2^-24" % (worst / 2**-24))


if __name__ == "__main__":
    main()
