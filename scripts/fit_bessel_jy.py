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
import mpmath as mp

from chebyshev import f32, horner_f32, interpolate, show

SPLIT = 2
DEGREE = 8
mp.mp.dps = 40


def modulus_and_phase(order, x):
    """√x·M_n(x) and φ_n(x)."""
    j, y = mp.besselj(order, x), mp.bessely(order, x)
    base = x - (2 * order + 1) * mp.pi / 4
    theta = mp.atan2(y, j)
    theta += 2 * mp.pi * mp.nint((base - theta) / (2 * mp.pi))
    return mp.sqrt(x) * mp.sqrt(j * j + y * y), theta - base


def fit(f):
    """f's interpolating polynomial on [0, 1], lowest first."""
    return interpolate(f, DEGREE, 0, 1)


def main():
    for order in (0, 1):
        modulus = [f32(c) for c in reversed(fit(lambda t: modulus_and_phase(order, SPLIT / t)[0]))]
        phase = [f32(c) for c in reversed(fit(lambda t: modulus_and_phase(order, SPLIT / t)[1]))]
        worst_m = worst_p = 0.0
        for i in range(1, 2001):
            t = f32(i / 2000)
            m, p = modulus_and_phase(order, SPLIT / mp.mpf(t))
            worst_m = max(worst_m, abs((horner_f32(modulus, t) - m) / m))
            worst_p = max(worst_p, abs(horner_f32(phase, t) - p))
        show("MODULUS_%d" % order, modulus)
        show("PHASE_%d" % order, phase)
        print("// order %d in f32: modulus %.2e relative, phase %.2e absolute" % (order, worst_m, worst_p))


if __name__ == "__main__":
    main()
