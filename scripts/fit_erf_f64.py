#!/usr/bin/env python3
"""The polynomials of core-ir/src/builder/f64_erf.rs, f64's erf.

- `erf(a) = a + a·(P(a²) - 1)` for `a < 1`: `P(z) = erf(√z)/√z` interpolated at the 13
  Chebyshev points of z in [0, 1], printed less 1 (its constant term 2/√π - 1), so that
  the sum's larger part, `a`, is exact.
- `erfc(a) = e^(-a²)·R(a)` for `1/2 ≤ a < 6`: `R = erfcx`, interpolated at the 17
  Chebyshev points of each of [1/2, 1], [1, 2], [2, 3.5] and [3.5, 6], as a polynomial in
  `a - c` (c the interval's centre, where the monomial coefficients round harmlessly);
- `erfc(a) = e^(-a²)·G(1/a²)/a` for `6 ≤ a < 28` (past 27.3 erfc underflows): `G(t) =
  a·erfcx(a)` at `a = 1/√t`, interpolated at the 13 Chebyshev points of t in
  [1/28², 1/36].

Each in 40-digit arithmetic, rounded to f64; the script prints them highest first, as the
Rust constants hold them, and the largest relative error of each evaluated by Horner's rule
in f64 over 2001 points (of `P - 1` relative to `P`).

Needs mpmath (`pip install mpmath`). Run: python3 scripts/fit_erf_f64.py
"""
import mpmath as mp

from chebyshev import interpolate

mp.mp.dps = 40
SMALL_DEGREE = 12
PIECES = [(0.5, 1.0), (1.0, 2.0), (2.0, 3.5), (3.5, 6.0)]
PIECE_DEGREE = 16
TAIL_DEGREE = 12


def p(z):
    return mp.erf(mp.sqrt(z)) / mp.sqrt(z) if z > 0 else 2 / mp.sqrt(mp.pi)


def erfcx(a):
    return mp.exp(a * a) * mp.erfc(a)


def horner(coefficients, v):
    """f64 coefficients (highest first) at f64 `v` by Horner's rule in f64."""
    acc = coefficients[0]
    for c in coefficients[1:]:
        acc = acc * v + c
    return acc


def worst(f, coefficients, lo, hi, at):
    """The largest relative error over 2001 points of [lo, hi]; `at(x)` the variable."""
    e = 0
    for i in range(2001):
        x = mp.mpf(lo) + (mp.mpf(hi) - lo) * i / 2000
        if x == 0:
            continue
        e = max(e, abs(horner(coefficients, float(at(x))) / f(x) - 1))
    return e


def show(name, rows):
    print("const %s = [" % name)
    for row in rows:
        print("    [")
        for c in row:
            print("        %r," % c)
        print("    ],")
    print("];")


fit = interpolate(p, SMALL_DEGREE, 0, 1)
fit[0] -= 1
small = [float(c) for c in reversed(fit)]
print("const SMALL: [f64; %d] = [" % len(small))
for c in small:
    print("    %r," % c)
print("];")
e = max(
    abs((horner(small, float(z)) + 1 - p(z)) / p(z))
    for z in (mp.mpf(i) / 2000 for i in range(2001))
)
print("// largest error of P relative to P: %s" % mp.nstr(e, 3))

rows = []
for lo, hi in PIECES:
    centre = (mp.mpf(lo) + hi) / 2
    fit = interpolate(lambda v: erfcx(v + centre), PIECE_DEGREE, lo - centre, hi - centre)
    row = [float(c) for c in reversed(fit)]
    rows.append(row)
    e = worst(erfcx, row, lo, hi, lambda a: a - centre)
    print("// [%s, %s], centre %s: largest relative error %s" % (lo, hi, centre, mp.nstr(e, 3)))
show("PIECES: [[f64; %d]; %d]" % (PIECE_DEGREE + 1, len(PIECES)), rows)

lo, hi = mp.mpf(1) / 28**2, mp.mpf(1) / 36


def g(t):
    a = 1 / mp.sqrt(t)
    return a * erfcx(a)


tail = [float(c) for c in reversed(interpolate(g, TAIL_DEGREE, lo, hi))]
print("const TAIL: [f64; %d] = [" % len(tail))
for c in tail:
    print("    %r," % c)
print("];")
print("// [1/28², 1/36]: largest relative error %s" % mp.nstr(worst(g, tail, lo, hi, lambda t: t), 3))
