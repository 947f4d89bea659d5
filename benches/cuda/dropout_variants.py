"""Hand-edited forms of rutile's `_seeded_dropout` PTX (BLOCK 1024, 4 warps: 8 elements a
thread, at the offsets o, o+1, o+2, o+3, o+512, ..., o+515), to learn what each change is
worth before the compiler makes it (timed by dropout_time.cu):

- rcp:  `div.full.f32 q, x, d` by the hoisted `rcp.approx.f32 r, d` and `mul.f32 q, x, r`,
        what ptxas makes of div.full where d is a normal number, without its two scalings
        per element (predicated multiplies that issue whatever the predicate).
- sr:   Philox's first product of each element but the first, `(o + c)·A` in 64 bits, as
        `o·A + c·A` (an add with carry instead of a wide multiply). The study leaves out
        the wrap of `o + c` past 2^32, which the benchmark's offsets never reach.
- both: the two.

    python3 dropout_variants.py gen.ptx   # writes rcp.ptx, sr.ptx, both.ptx beside it
"""
import re
import sys
from pathlib import Path

A = 0xD2511F53
LANE_OFFSETS = [0, 1, 2, 3, 512, 513, 514, 515]


def reciprocal(ptx: str) -> str:
    divs = re.findall(r"div\.full\.f32 (%f\d+), (%f\d+), (%f\d+);", ptx)
    divisor = divs[0][2]
    assert all(d == divisor for _, _, d in divs), "one divisor expected"
    ptx = ptx.replace(".reg .f32 %f<", ".reg .f32 %frcp;\n\t.reg .f32 %f<", 1)
    first = True

    def mul(m):
        nonlocal first
        q, x, _ = m.groups()
        pre = f"rcp.approx.f32 %frcp, {divisor};\n\t" if first else ""
        first = False
        return f"{pre}mul.f32 {q}, {x}, %frcp;"

    return re.sub(r"div\.full\.f32 (%f\d+), (%f\d+), (%f\d+);", mul, ptx)


def strength_reduced(ptx: str) -> str:
    # The first products by A of the offsets (registers moved from the offsets' adds).
    regs = re.findall(r"mul\.wide\.u32 (%rd\d+), (%r\d+), (%r\d+);", ptx)
    const_a = re.search(rf"mov\.b32 (%r\d+), {A};", ptx).group(1)
    firsts = [(d, s) for d, s, c in regs if c == const_a][:8]
    base = firsts[0][0]
    out = ptx
    for (dst, src), c in zip(firsts[1:], LANE_OFFSETS[1:]):
        line = f"mul.wide.u32 {dst}, {src}, {const_a};"
        assert out.count(line) == 1, line
        out = out.replace(line, f"add.s64 {dst}, {base}, {c * A};")
    return out


def main():
    gen = Path(sys.argv[1])
    ptx = gen.read_text()
    forms = {"rcp": reciprocal(ptx), "sr": strength_reduced(ptx)}
    forms["both"] = strength_reduced(forms["rcp"])
    for name, text in forms.items():
        (gen.parent / f"{name}.ptx").write_text(text)


if __name__ == "__main__":
    main()
