#!/usr/bin/env python3
"""Reshaped versions of a dumped matmul kernel's K loop, for `matmul_wgsl_variants`: each
tries one change to how the loop holds its operands, to be timed against the unedited
kernel before the code generator is taught it. (`ablate.py` leaves parts out; these keep
every part and move or re-type it.)

    python3 benches/matmul-wgsl/reshape.py KERNEL.wgsl OUTDIR BLOCK_MxBLOCK_N

KERNEL.wgsl is a `matmul_kernel.<n>.wgsl` that `RUTILE_DUMP=DIR` wrote. OUTDIR receives the
unedited kernel and one file per variant, each named `<variant>_<BLOCK_M>x<BLOCK_N>.wgsl`:

  baseline          the kernel as generated
  words             the prefetched operands held as the 8-byte words they were loaded as
                    (`vec2<u32>`, two 32-bit registers for four f16), unpacked only where
                    they are stored into workgroup memory; the results are the kernel's.
                    Asks whether the four `f16` registers of each word are what makes the
                    16-warp kernels spill at NVIDIA's 128-register cap.
  fragments_ahead   a timing model: each body of the K loop loads its cooperative matrices
                    into one set of matrices while its multiply-adds read the other set,
                    which the body before loaded (the fragments one iteration ahead). The
                    results are wrong (each step multiplies the step before's fragments);
                    only the time matters.
  words_fragments_ahead   both.

The K loop is found as in `ablate.py`; its bodies are the stretches between its barriers
(a loop unrolled by two has two). Time the variants in more than one process (see
`ablate.py`).
"""

import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from ablate import arguments, loop_spans, write_variants  # noqa: E402

COMPONENTS = "xyzw"


def words(lines):
    """The prefetch registers, four `f16` from one `vec4<f16>` load, held as `vec2<u32>`."""
    loaded = re.compile(r"\s*let (_e\d+) = [ab]_ptr\[")
    part = re.compile(r"\s*(r\d+_) = (_e\d+)\.([xyzw]);$")
    # Each group of four registers one load fills, keyed by its first register.
    group_of = {}
    for i, l in enumerate(lines):
        m = loaded.match(l)
        if not m:
            continue
        regs = []
        for k in range(1, 5):
            p = part.match(lines[i + k]) if i + k < len(lines) else None
            if not p or p.group(2) != m.group(1) or p.group(3) != COMPONENTS[k - 1]:
                break
            regs.append(p.group(1))
        if len(regs) != 4:
            continue
        for c, r in enumerate(regs):
            if group_of.get(r, (regs[0], c)) != (regs[0], c):
                sys.exit(f"register {r} is filled from different words; not a prefetch register")
            group_of[r] = (regs[0], c)
    if not group_of:
        sys.exit("no prefetch registers (`rN_ = _eK.x` after an `a_ptr`/`b_ptr` load) found")
    word = {first: f"w{n}_" for n, first in enumerate(sorted({g for g, _ in group_of.values()}))}
    out, declared = [], False
    for l in lines:
        m = re.match(r"(\s*)(r\d+_) = (0h|(_e\d+)\.[xyzw]);$", l)
        if m and m.group(2) in group_of:
            first, c = group_of[m.group(2)]
            if c == 0:
                value = "vec2<u32>()" if m.group(3) == "0h" else packed(m.group(4))
                out.append(f"{m.group(1)}{word[first]} = {value};")
            continue
        m = re.match(r"(\s*let _e\d+ = )(r\d+_);$", l)
        if m and m.group(2) in group_of:
            first, c = group_of[m.group(2)]
            half = f"({word[first]}.{COMPONENTS[c // 2]} >> 16u)" if c % 2 else f"{word[first]}.{COMPONENTS[c // 2]}"
            out.append(f"{m.group(1)}bitcast<f16>(u16({half}));")
            continue
        out.append(l)
        if not declared and re.match(r"    var r\d+_: ", l):
            out.extend(f"    var {w}: vec2<u32>;" for w in word.values())
            declared = True
    # (naga has no bitcast between `vec4<f16>` and `vec2<u32>`; 16-bit integers carry the
    # bits.)
    if "enable wgpu_int16;" not in out:
        out.insert(next(i for i, l in enumerate(out) if l.startswith("enable ")), "enable wgpu_int16;")
    return out


def packed(v):
    """The bits of `vec4<f16>` `v` as `vec2<u32>`, the first half of each pair low."""
    pair = [f"(u32(bitcast<u16>({v}.{a})) | (u32(bitcast<u16>({v}.{b})) << 16u))" for a, b in ("xy", "zw")]
    return f"vec2<u32>({pair[0]}, {pair[1]})"


def fragments_ahead(lines):
    """Each K-loop body loads its cooperative matrices into one set and multiplies the
    other (a timing model)."""
    load = re.compile(r"(\s*)(c\d+_) = coopLoadT<(coop_mat\w+<f16,([AB])>)>(.*)$")
    read = re.compile(r"(\s*let _e\d+ = )(c\d+_);$")
    out = list(lines)
    types = {}
    body = 0
    for start, end in loop_spans(lines):
        bounds = [k for k in range(start, end + 1) if lines[k].strip() == "workgroupBarrier();"]
        for b, first in enumerate(bounds):
            last = bounds[b + 1] if b + 1 < len(bounds) else end
            fill, use = ("x", "y") if body % 2 == 0 else ("y", "x")
            slot_of, count = {}, {"A": 0, "B": 0}
            for k in range(first, last):
                m = load.match(out[k])
                if m:
                    indent, var, ty, role, rest = m.groups()
                    slot = f"{role.lower()}{count[role]}"
                    count[role] += 1
                    types[slot] = ty
                    slot_of[var] = slot
                    out[k] = f"{indent}{fill}{slot}_ = coopLoadT<{ty}>{rest}"
                    continue
                m = read.match(out[k])
                if m and m.group(2) in slot_of:
                    out[k] = f"{m.group(1)}{use}{slot_of[m.group(2)]}_;"
            body += 1
    if not types:
        sys.exit("no cooperative loads in the K loop")
    at = next(i for i, l in enumerate(out) if re.match(r"    var c\d+_: ", l))
    decls = [f"    var {s}{slot}_: {ty};" for s in "xy" for slot, ty in sorted(types.items())]
    return out[:at] + decls + out[at:]


def main():
    lines, outdir, block = arguments(__doc__)
    variants = {
        "baseline": lines,
        "words": words(lines),
        "fragments_ahead": fragments_ahead(lines),
        "words_fragments_ahead": fragments_ahead(words(lines)),
    }
    write_variants(variants, outdir, block)


if __name__ == "__main__":
    main()
