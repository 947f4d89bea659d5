#!/usr/bin/env python3
"""Ablations of a dumped matmul kernel's K loop, for `matmul_wgsl_variants`: each variant
leaves one part of the loop out, so that the time it saves bounds what that part costs (the
results of a variant are wrong, and the study says so; only its time matters). With no
profiler for the Vulkan driver's code, this is how to learn whether the loop waits on its
global loads, its stores into workgroup memory, its barriers, its cooperative loads or its
multiply-adds.

    python3 benches/matmul-wgsl/ablate.py KERNEL.wgsl OUTDIR BLOCK_MxBLOCK_N

KERNEL.wgsl is a `matmul_kernel.<n>.wgsl` that `RUTILE_DUMP=DIR` wrote (the chosen
configuration's: its `.thread.ir` names the warps and shared buffers). OUTDIR receives the
unedited kernel and one file per ablation, each named `<variant>_<BLOCK_M>x<BLOCK_N>.wgsl`:

  baseline      the kernel as generated
  no_barrier    the K loop without its workgroup barriers
  no_global     the K loop's global loads never made (their branches' conditions false,
                the unpredicated ones replaced by zeros)
  no_store      the K loop without its stores into workgroup memory
  no_coop_load  the K loop without its cooperative loads (the matrices keep their values)
  no_mma        the K loop without its multiply-adds (the cooperative loads then go too)

The K loop is the first `loop {` whose body holds a `coopMultiplyAdd`, with the loops that
follow it and hold one too (a loop unrolled by two is followed by one for its odd last
iteration).

Time the variants in more than one process: through NVIDIA's driver (580) the first
process that compiled them timed every edited variant slow and erratic (up to 4x), and the
processes after it, which found them in the driver's cache, agreed with each other within
0.5% (docs/performance.md, "Where the K loop's time goes").
"""

import os
import re
import sys


def block_end(lines, start):
    """The index of the line that closes the block opened on line `start`."""
    depth, j = 0, start
    while True:
        depth += lines[j].count("{") - lines[j].count("}")
        if depth == 0:
            return j
        j += 1


def loop_spans(lines):
    """(start, end) line indices of every top-level-in-function `loop {` ... `}` whose body
    holds a cooperative multiply-add."""
    spans = []
    i = 0
    while i < len(lines):
        if lines[i].strip() == "loop {":
            j = block_end(lines, i)
            if any("coopMultiplyAdd" in l for l in lines[i : j + 1]):
                spans.append((i, j))
            i = j + 1
        else:
            i += 1
    return spans


def edit(lines, spans, keep):
    """`lines` with each line inside `spans` kept where `keep(line)` holds."""
    out = list(lines)
    for start, end in spans:
        for k in range(start, end + 1):
            if not keep(out[k]):
                out[k] = ""
    return out


def no_global(lines, spans):
    """The branches that load A or B from global memory, never taken, and the loads made
    without a branch (the loop of trips whose masks all hold) replaced by zeros."""
    out = list(lines)
    elem = {}
    for line in lines:
        m = re.match(r"var<storage, \w+> (a_ptr|b_ptr): array<(.+)>;$", line.strip())
        if m:
            elem[m.group(1)] = m.group(2)
    for start, end in spans:
        k = start
        while k <= end:
            m = re.match(r"(\s*)if (_e\d+) \{$", out[k])
            if m:
                body = "".join(out[k : block_end(out, k) + 1])
                if "a_ptr[" in body or "b_ptr[" in body:
                    out[k] = f"{m.group(1)}if false {{"
            m = re.match(r"(\s*let _e\d+ = )(a_ptr|b_ptr)\[.*\];$", out[k])
            if m and m.group(2) in elem:
                out[k] = f"{m.group(1)}{elem[m.group(2)]}();"
            k += 1
    return out


def arguments(usage):
    """KERNEL.wgsl's lines, OUTDIR and BLOCK_MxBLOCK_N from the command line; exits with
    `usage` when they are not that, or the kernel has no K loop on cooperative matrices."""
    if len(sys.argv) != 4 or not re.fullmatch(r"\d+x\d+", sys.argv[3]):
        sys.exit(usage)
    src, outdir, block = sys.argv[1:]
    lines = open(src).read().split("\n")
    if not loop_spans(lines):
        sys.exit(f"{src}: no loop with cooperative multiply-adds")
    return lines, outdir, block


def write_variants(variants, outdir, block):
    """Each `name: lines` of `variants` as `OUTDIR/<name>_<block>.wgsl`."""
    os.makedirs(outdir, exist_ok=True)
    for name, text in variants.items():
        with open(os.path.join(outdir, f"{name}_{block}.wgsl"), "w") as f:
            f.write("\n".join(text))
    print(f"{len(variants)} variants in {outdir}")


def main():
    lines, outdir, block = arguments(__doc__)
    spans = loop_spans(lines)
    coop_load = re.compile(r"\s*c\d+_ = coopLoadT<")
    shared_store = re.compile(r"\s*shared\d+_\[.*\] = ")
    variants = {
        "baseline": lines,
        "no_barrier": edit(lines, spans, lambda l: l.strip() != "workgroupBarrier();"),
        "no_global": no_global(lines, spans),
        "no_store": edit(lines, spans, lambda l: not shared_store.match(l)),
        "no_coop_load": edit(lines, spans, lambda l: not coop_load.match(l)),
        "no_mma": edit(lines, spans, lambda l: "coopMultiplyAdd" not in l),
    }
    write_variants(variants, outdir, block)


if __name__ == "__main__":
    main()
