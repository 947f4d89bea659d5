#!/usr/bin/env python3
"""The polynomials of core-ir/src/builder/bessel_jy.rs: J0, J1, Y0 and Y1 from 2 on.

From 2 on each pair is written as J_n = M_n·cos θ_n, Y_n = M_n·sin θ_n: the modulus
M_n = √(J_n² + Y_n²) and the phase θ_n = x - (2n+1)π/4 + φ_n are smooth and slowly varying
(√x·M_n → √(2/π), φ_n → 0 as x grows). √x·M_n and φ_n as functions of t = 2/x in (0, 1]
are interpolated at the 9 Chebyshev points of [0, 1] in 40-digit arithmetic and turned
into monomial coefficients in t, rounded to f32 and printed highest first, as the Rust
constants hold them, with the largest error of each evaluated by Horner's rule in f32
(the modulus relative, the phase absolute).

Needs mpmath (`pip install mpmath`). Run: python3 scripts/fit_bessel_jy.py
"""
import struct

import mpmath as mp

SPLIT = 2
DEGREE = 8
mp.mp.dps = 40


def f32(v):
    """v rounded to the nearest f32."""
    return struct.unpack("f", struct.pack("f", float(v)))[0]


def modulus_and_phase(order, x):
    """√x·M_n(x) and φ_n(x)."""
    j, y = mp.besselj(order, x), mp.bessely(order, x)
    base = x - (2 * order + 1) * mp.pi / 4
    theta = mp.atan2(y, j)
    theta += 2 * mp.pi * mp.nint((base - theta) / (2 * mp.pi))
    return mp.sqrt(x) * mp.sqrt(j * j + y * y), theta - base


def fit(f):
    """f's interpolating polynomial on [0, 1], lowest first."""
    n = DEGREE + 1
    nodes = [mp.cos(mp.pi * (k + mp.mpf(1) / 2) / n) for k in range(n)]
    values = [f((u + 1) / 2) for u in nodes]
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
    in_t = [mp.mpf(0)] * n
    for i, c in enumerate(in_u):
        for k in range(i + 1):
            in_t[k] += c * mp.binomial(i, k) * 2**k * (-1) ** (i - k)
    return in_t


def horner(coefficients, t):
    acc = coefficients[0]
    for c in coefficients[1:]:
        acc = f32(f32(acc * t) + c)
    return acc


def show(name, coefficients):
    print("const %s: [f32; %d] = [" % (name, len(coefficients)))
    for c in coefficients:
        print("    %r," % c)
    print("];")


def main():
    for order in (0, 1):
        modulus = [f32(c) for c in reversed(fit(lambda t: modulus_and_phase(order, SPLIT / t)[0]))]
        phase = [f32(c) for c in reversed(fit(lambda t: modulus_and_phase(order, SPLIT / t)[1]))]
        worst_m = worst_p = 0.0
        for i in range(1, 2001):
            t = f32(i / 2000)
            m, p = modulus_and_phase(order, SPLIT / mp.mpf(t))
            worst_m = max(worst_m, abs((horner(modulus, t) - m) / m))
            worst_p = max(worst_p, abs(horner(phase, t) - p))
        show("MODULUS_%d" % order, modulus)
        show("PHASE_%d" % order, phase)
        print("// order %d in f32: modulus %.2e relative, phase %.2e absolute" % (order, worst_m, worst_p))


if __name__ == "__main__":
    main()
