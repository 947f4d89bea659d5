#!/usr/bin/env python3
"""The words of 2/π that core-ir/src/builder/reduce_pi.rs holds: its first 1216 fractional
bits as 19 64-bit words, most significant first, printed as the Rust constant holds them.

Needs mpmath (`pip install mpmath`). Run: python3 scripts/two_over_pi.py
"""
import mpmath as mp

WORDS = 19
mp.mp.prec = 64 * WORDS + 64

v = 2 / mp.pi
print("const TWO_OVER_PI: [u64; %d] = [" % WORDS)
for _ in range(WORDS):
    v *= 2**64
    w = int(mp.floor(v))
    v -= w
    h = "%016X" % w
    print("    0x%s_%s_%s_%s," % (h[0:4], h[4:8], h[8:12], h[12:16]))
print("];")
