"""What the fitting scripts share: interpolation at Chebyshev points in mpmath, the
polynomial turned into monomial coefficients, and f32 rounding and evaluation.

Needs mpmath (`pip install mpmath`).
"""
import struct

import mpmath as mp


def f32(v):
    """v rounded to the nearest f32."""
    return struct.unpack("f", struct.pack("f", float(v)))[0]


def interpolate(f, degree, lo=-1, hi=1):
    """The polynomial of `degree` interpolating `f` at the Chebyshev points of [lo, hi], as
    monomial coefficients in the variable of [lo, hi], lowest first (in mpmath numbers)."""
    n = degree + 1
    lo, hi = mp.mpf(lo), mp.mpf(hi)
    nodes = [mp.cos(mp.pi * (k + mp.mpf(1) / 2) / n) for k in range(n)]
    values = [f(lo + (hi - lo) * (u + 1) / 2) for u in nodes]
    cheb = []
    for j in range(n):
        s = sum(values[k] * mp.cos(mp.pi * j * (k + mp.mpf(1) / 2) / n) for k in range(n))
        cheb.append(s / n if j == 0 else 2 * s / n)
    # T_j as monomials in u, lowest first.
    t_polys = [[mp.mpf(1)], [mp.mpf(0), mp.mpf(1)]]
    for j in range(2, n):
        up = [mp.mpf(0)] + [2 * c for c in t_polys[j - 1]]
        down = t_polys[j - 2] + [mp.mpf(0)] * (len(up) - len(t_polys[j - 2]))
        t_polys.append([a - b for a, b in zip(up, down)])
    in_u = [mp.mpf(0)] * n
    for j in range(n):
        for i, c in enumerate(t_polys[j]):
            in_u[i] += cheb[j] * c
    # u = a·x + b maps [lo, hi] onto [-1, 1].
    a, b = 2 / (hi - lo), -(hi + lo) / (hi - lo)
    in_x = [mp.mpf(0)] * n
    for i, c in enumerate(in_u):
        for k in range(i + 1):
            in_x[k] += c * mp.binomial(i, k) * a**k * b ** (i - k)
    return in_x


def horner_f32(coefficients, x):
    """Coefficients (f32, highest first) at f32 `x` by Horner's rule in f32."""
    acc = coefficients[0]
    for c in coefficients[1:]:
        acc = f32(f32(acc * x) + c)
    return acc


def show(name, coefficients):
    """The Rust constant `name` holding `coefficients` (highest first)."""
    print("const %s: [f32; %d] = [" % (name, len(coefficients)))
    for c in coefficients:
        print("    %r," % c)
    print("];")
