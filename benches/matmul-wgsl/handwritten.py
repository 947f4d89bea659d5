#!/usr/bin/env python3
"""Hand-written cooperative-matrix matmuls in WGSL, for `matmul_wgsl_variants`: the structures
the compiler could emit, timed before teaching it to.

    python3 benches/matmul-wgsl/handwritten.py DIR

writes one kernel per structure in STRUCTURES into DIR, named `<tag>_<BLOCK_M>x<BLOCK_N>.wgsl`
(the name's block sets the grid). Each computes C = A B for row-major f16 A (M x K), B (K x N)
and C, f32 accumulation, with M, N and K multiples of the block (these are studies of the K
loop, and the harness runs square sizes that the blocks divide). The loads are unmasked, or
(`masked`) masked as the compiler's are: each under a branch on its bounds (`True`), or from
an index selected in bounds with the value selected after (`"select"`). `stages=1`: one
workgroup stage, refilled between two barriers a step (what fits 128 x 256 x 32 in 48 KiB);
`frag_ahead`: a step's second 16-wide sub-step's matrices loaded before the first one's
multiply-adds. Four options each take one of the compiler's ways, to learn which of them
costs (docs/performance.md, "One workgroup stage, and the vectors of the K loop"):
`a_one`, A's matrices loaded one at a time, each used at once by its row of multiply-adds;
`vec8`, 8 consecutive f16 a thread (two `vec4<f16>` side by side) instead of 4;
`scalar_regs`, each prefetched f16 in a variable of its own; `rotated` (one stage), the
loop in the order barrier, stores, barrier, next step's loads, multiply-adds. `loads_at`:
the next step's loads before the step's multiply-adds ("top"), after half of them ("mid"),
or B's before and A's after half ("split").

The K loop: B's tile of each step passes from global memory through registers into one of
two workgroup stages (loaded one step ahead, stored after the step's multiply-adds, one
barrier a step). A's tile either does the same (`a_global=False`, the compiler's structure
today) or is never staged: each subgroup loads its A matrices straight from the storage
buffer with cooperative loads (`a_global=True`), one K step of the matrix shape ahead. A then
costs no workgroup memory, so 48 KiB hold deeper K steps of B (one barrier per 32 or 64 K
instead of per 16). Measured on an H200, A from global memory ran at half the rate, and the
loads' masks cost 13% (docs/performance.md, "Masks in the K loop").
"""

import os
import sys

# tag, BLOCK_M, BLOCK_N, BLOCK_K, subgroups along M, along N, A from global memory, options
STRUCTURES = [
    ("hs", 128, 256, 16, 2, 8, False, {}),
    ("hsmask", 128, 256, 16, 2, 8, False, {"masked": True}),
    ("hssel", 128, 256, 16, 2, 8, False, {"masked": "select"}),
    ("hsw8", 128, 256, 16, 2, 4, False, {}),
    ("hsw8", 256, 128, 16, 4, 2, False, {}),
    ("hsk32w8", 128, 128, 32, 2, 4, False, {}),
    ("hsw4", 128, 128, 16, 2, 2, False, {}),
    ("hsw8", 128, 128, 16, 2, 4, False, {}),
    ("hs1k32", 128, 256, 32, 2, 8, False, {"stages": 1}),
    ("hs1k32fa", 128, 256, 32, 2, 8, False, {"stages": 1, "frag_ahead": True}),
    # hs1k32, one difference from the compiler's 128 x 256 x 32 at a time.
    ("hs1k32aone", 128, 256, 32, 2, 8, False, {"stages": 1, "a_one": True}),
    ("hs1k32v8", 128, 256, 32, 2, 8, False, {"stages": 1, "vec8": True}),
    ("hs1k32sr", 128, 256, 32, 2, 8, False, {"stages": 1, "scalar_regs": True}),
    ("hs1k32rot", 128, 256, 32, 2, 8, False, {"stages": 1, "rotated": True}),
    ("hs1k32all", 128, 256, 32, 2, 8, False,
     {"stages": 1, "a_one": True, "vec8": True, "scalar_regs": True, "rotated": True}),
    ("hs1k32c3", 128, 256, 32, 2, 8, False, {"stages": 1, "a_one": True, "scalar_regs": True, "rotated": True}),
    ("hs1k32srrot", 128, 256, 32, 2, 8, False, {"stages": 1, "scalar_regs": True, "rotated": True}),
    ("hsk32w8fa", 128, 128, 32, 2, 4, False, {"frag_ahead": True}),
    # Where the next step's loads go among the step's multiply-adds (not yet timed).
    ("hsmid", 128, 256, 16, 2, 8, False, {"loads_at": "mid"}),
    ("hssplit", 128, 256, 16, 2, 8, False, {"loads_at": "split"}),
    ("hs1k32mid", 128, 256, 32, 2, 8, False, {"stages": 1, "loads_at": "mid"}),
    ("hs1k32split", 128, 256, 32, 2, 8, False, {"stages": 1, "loads_at": "split"}),
    ("ag16", 128, 256, 16, 2, 8, True, {}),
    ("ag32", 256, 128, 32, 4, 2, True, {}),
    ("ag64", 256, 128, 64, 4, 2, True, {}),
]

PAD = 8  # f16 elements of padding a workgroup row (16 bytes), as rutile's coop tiles


def kernel(bm, bn, bk, wm, wn, a_global, masked=False, stages=2, frag_ahead=False, a_one=False, vec8=False,
           scalar_regs=False, rotated=False, loads_at="top"):
    warps = wm * wn
    threads = 32 * warps
    tm, tn = bm // wm // 16, bn // wn // 16  # accumulator matrices a subgroup along M, N
    pb = bn + PAD  # B stage pitch
    sb_stage = bk * pb
    pa = bk + PAD
    sa_stage = bm * pa
    assert stages in (1, 2)
    # Each thread moves `per` consecutive f16 a vector: 4 (one vec4<f16>), or with `vec8` 8 (two
    # vec4<f16> side by side, as the compiler's vectors).
    per = 8 if vec8 else 4
    b_vecs = bk * bn // per // threads  # vectors of B each thread moves a step
    a_vecs = bm * bk // per // threads
    assert b_vecs * per * threads == bk * bn and (a_global or a_vecs * per * threads == bm * bk)
    halves = per // 4
    o = []
    w = o.append
    w("enable f16;\nenable wgpu_cooperative_matrix;\n")
    w("struct Launch { num_programs: vec3<u32>, program_offset: vec3<u32>, M: i32, N: i32, K: i32, }")
    a_ty = "f16" if a_global else "vec4<f16>"
    w(f"@group(0) @binding(0) var<storage, read_write> a_ptr: array<{a_ty}>;")
    w("@group(0) @binding(1) var<storage, read_write> b_ptr: array<vec4<f16>>;")
    w("@group(0) @binding(2) var<storage, read_write> c_ptr: array<vec4<f16>>;")
    w("@group(0) @binding(3) var<uniform> launch: Launch;")
    w(f"var<workgroup> sb: array<f16, {stages * sb_stage}>;")
    if not a_global:
        w(f"var<workgroup> sa: array<f16, {stages * sa_stage}>;")
    w(f"var<workgroup> sc: array<f32, {warps * 256}>;")
    w(f"@compute @workgroup_size({threads}, 1, 1)")
    w("fn matmul_kernel(@builtin(local_invocation_index) tid: u32, @builtin(workgroup_id) wg: vec3<u32>,"
      " @builtin(subgroup_id) warp: u32, @builtin(subgroup_invocation_id) lane: u32) {")
    w("  let M = u32(launch.M); let N = u32(launch.N); let K = u32(launch.K);")
    # Grouped program order (GROUP_M = 8), as the tutorial's kernel.
    w(f"  let pid = wg.x; let num_m = M / {bm}u; let num_n = N / {bn}u;")
    w("  let group = pid / (8u * num_n); let first_m = group * 8u;")
    w("  let group_m = min(num_m - first_m, 8u);")
    w("  let pid_m = first_m + (pid % (8u * num_n)) % group_m;")
    w("  let pid_n = (pid % (8u * num_n)) / group_m;")
    w(f"  let m0 = pid_m * {bm}u; let n0 = pid_n * {bn}u;")
    w(f"  let wi = warp / {wn}u; let wj = warp % {wn}u;")
    w(f"  let wm0 = wi * {tm * 16}u; let wn0 = wj * {tn * 16}u;")
    for i in range(tm):
        for j in range(tn):
            w(f"  var acc{i}_{j} = coop_mat16x16<f32,C>();")
    # Each thread's vectors of B's (and A's) tile: fixed rows and columns, the K offset moves.
    def prefetch_regs(name):
        # A vector's prefetch registers: vec4<f16> values, or (`scalar_regs`) one f16 each,
        # as the compiler's.
        for h in range(halves):
            if scalar_regs:
                for comp in "xyzw":
                    w(f"  var {name}_{h}{comp}: f16;")
            else:
                w(f"  var {name}_{h}: vec4<f16>;")

    for v in range(b_vecs):
        w(f"  let bv{v} = tid + {v * threads}u; let brow{v} = bv{v} / {bn // per}u; let bcol{v} = (bv{v} % {bn // per}u) * {per}u;")
        w(f"  let bsh{v} = brow{v} * {pb}u + bcol{v};")
        prefetch_regs(f"pb{v}")
    if not a_global:
        for v in range(a_vecs):
            w(f"  let av{v} = tid + {v * threads}u; let arow{v} = av{v} / {bk // per}u; let acol{v} = (av{v} % {bk // per}u) * {per}u;")
            w(f"  let ash{v} = arow{v} * {pa}u + acol{v};")
            prefetch_regs(f"pa{v}")

    def masked_load(reg, buf, index, ok):
        # The compiler's form (`masked=True`): the load under a branch on its bounds, zero where
        # out; or (`masked="select"`) branch-free: an in-bounds index where out, the value
        # replaced by zero after the load.
        if not masked:
            for h in range(halves):
                if scalar_regs:
                    w(f"    {{ let v = {buf}[{index} + {h}u];"
                      + "".join(f" {reg}_{h}{c} = v.{c};" for c in "xyzw") + " }")
                else:
                    w(f"    {reg}_{h} = {buf}[{index} + {h}u];")
            return
        assert halves == 1 and not scalar_regs, "masked loads are written for one vec4<f16> a vector"
        reg = f"{reg}_0"
        if masked == "select":
            w(f"    {{ let ok = {ok}; {reg} = select(vec4<f16>(), {buf}[select(0u, {index}, ok)], ok); }}")
        else:
            w(f"    {reg} = vec4<f16>(); if {ok} {{ {reg} = {buf}[{index}]; }}")

    def global_loads(k, in_loop=False, parts="ba"):
        guard = "kt + 1u < steps && " if masked and in_loop else ""
        if "b" in parts:
            for v in range(b_vecs):
                masked_load(f"pb{v}", "b_ptr", f"(({k} + brow{v}) * N + n0 + bcol{v}) / 4u", f"{guard}{k} + brow{v} < K")
        if not a_global and "a" in parts:
            for v in range(a_vecs):
                masked_load(f"pa{v}", "a_ptr", f"((m0 + arow{v}) * K + {k} + acol{v}) / 4u",
                            f"{guard}{k} + acol{v} < K && m0 + arow{v} < M")

    def element(reg, h, comp):
        return f"{reg}_{h}{comp}" if scalar_regs else f"{reg}_{h}.{comp}"

    def shared_stores(stage):
        for v in range(b_vecs):
            for h in range(halves):
                for c, comp in enumerate("xyzw"):
                    w(f"    sb[{stage} * {sb_stage}u + bsh{v} + {4 * h + c}u] = {element(f'pb{v}', h, comp)};")
        if not a_global:
            for v in range(a_vecs):
                for h in range(halves):
                    for c, comp in enumerate("xyzw"):
                        w(f"    sa[{stage} * {sa_stage}u + ash{v} + {4 * h + c}u] = {element(f'pa{v}', h, comp)};")

    def a_fragments(k, kk, name):
        # A's matrices for K offset k + kk, from global memory or the stage.
        for i in range(tm):
            if a_global:
                w(f"    let {name}{i} = coopLoadT<coop_mat16x16<f16,A>>(&a_ptr[(m0 + wm0 + {i * 16}u) * K + {k} + {kk}u], K);")
            else:
                w(f"    let {name}{i} = coopLoadT<coop_mat16x16<f16,A>>(&sa[s * {sa_stage}u + (wm0 + {i * 16}u) * {pa}u + {kk}u], {pa}u);")

    ksteps = bk // 16

    def fragments(kk):
        # The matrices of K sub-step kk from the stage (A's from global memory come one
        # sub-step ahead of their use, below).
        for j in range(tn):
            w(f"    let b{kk}_{j} = coopLoadT<coop_mat16x16<f16,B>>(&sb[s * {sb_stage}u + {kk * 16 * pb}u + wn0 + {j * 16}u], {pb}u);")
        if not a_global:
            a_fragments("k", kk * 16, f"a{kk}_")

    def multiply_adds(midway=None):
        # `frag_ahead`: sub-step kk + 1's matrices loaded before sub-step kk's multiply-adds;
        # `a_one`: B's matrices, then one A matrix at a time, each used at once by its row of
        # multiply-adds (as the compiler's). `midway` is called once half of the step's
        # multiply-adds are written.
        done = [0]
        half = ksteps * tm * tn // 2

        def mma(line):
            w(line)
            done[0] += 1
            if midway and done[0] == half:
                midway()

        if a_global:
            a_fragments("k", 0, "a0_")
        if frag_ahead:
            fragments(0)
        for kk in range(ksteps):
            if a_one:
                for j in range(tn):
                    w(f"    let b{kk}_{j} = coopLoadT<coop_mat16x16<f16,B>>(&sb[s * {sb_stage}u + {kk * 16 * pb}u + wn0 + {j * 16}u], {pb}u);")
                for i in range(tm):
                    w(f"    a_cur = coopLoadT<coop_mat16x16<f16,A>>(&sa[s * {sa_stage}u + (wm0 + {i * 16}u) * {pa}u + {kk * 16}u], {pa}u);")
                    for j in range(tn):
                        mma(f"    acc{i}_{j} = coopMultiplyAdd(a_cur, b{kk}_{j}, acc{i}_{j});")
                continue
            if frag_ahead:
                if kk + 1 < ksteps:
                    fragments(kk + 1)
            else:
                fragments(kk)
            if a_global and kk + 1 < ksteps:
                a_fragments("k", (kk + 1) * 16, f"a{kk + 1}_")
            for i in range(tm):
                for j in range(tn):
                    mma(f"    acc{i}_{j} = coopMultiplyAdd(a{kk}_{i}, b{kk}_{j}, acc{i}_{j});")

    if a_one:
        w("  var a_cur: coop_mat16x16<f16,A>;")
    global_loads("0u")
    if not rotated:
        shared_stores("0u")
        w("  workgroupBarrier();")
    w(f"  let steps = K / {bk}u;")
    w("  for (var kt = 0u; kt < steps; kt++) {")
    w("    let s = kt & 1u;" if stages == 2 else "    let s = 0u;")
    w(f"    let k = kt * {bk}u;")
    # The next step's loads, clamped to the last step so that the body has no branch.
    if masked:
        w(f"    let kn = (kt + 1u) * {bk}u;")
    else:
        w(f"    let kn = min(kt + 1u, steps - 1u) * {bk}u;")
    if rotated:
        # The compiler's order with one stage: wait for every subgroup to be done with the
        # stage, refill it, wait; then the next step's loads and this step's multiply-adds.
        assert stages == 1 and not masked and not a_global
        w("    workgroupBarrier();")
        shared_stores("0u")
        w("    workgroupBarrier();")
        global_loads("kn")
        multiply_adds()
    else:
        # `loads_at`: the next step's loads before the step's multiply-adds ("top"), after
        # half of them ("mid"), or B's before and A's after half ("split").
        before, midway = {"top": ("ba", ""), "mid": ("", "ba"), "split": ("b", "a")}[loads_at]
        global_loads("kn", in_loop=True, parts=before)
        multiply_adds(midway=(lambda: global_loads("kn", in_loop=True, parts=midway)) if midway else None)
        if stages == 2:
            w("    if kt + 1u < steps {")
            shared_stores("(1u - s)")
            w("    }")
            w("    workgroupBarrier();")
        else:
            # One stage: every subgroup done reading it before it is refilled.
            w("    workgroupBarrier();")
            w("    if kt + 1u < steps {")
            shared_stores("0u")
            w("    }")
            w("    workgroupBarrier();")
    w("  }")
    # Epilogue: each subgroup's matrices through its own 16 x 16 f32 slot, to f16 vectors.
    w("  let slot = warp * 256u;")
    w("  let r = lane / 2u; let c8 = (lane % 2u) * 8u;")
    for i in range(tm):
        for j in range(tn):
            w(f"  coopStoreT(acc{i}_{j}, &sc[slot], 16u);")
            w("  workgroupBarrier();")
            w("  {")
            w("    let p = slot + r * 16u + c8;")
            w(f"    let row = m0 + wm0 + {i * 16}u + r; let col = n0 + wn0 + {j * 16}u + c8;")
            w("    c_ptr[(row * N + col) / 4u] = vec4<f16>(vec4<f32>(sc[p], sc[p + 1u], sc[p + 2u], sc[p + 3u]));")
            w("    c_ptr[(row * N + col) / 4u + 1u] = vec4<f16>(vec4<f32>(sc[p + 4u], sc[p + 5u], sc[p + 6u], sc[p + 7u]));")
            w("  }")
            w("  workgroupBarrier();")
    w("}")
    return "\n".join(line for line in o if line != "") + "\n"


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    for tag, bm, bn, bk, wm, wn, a_global, options in STRUCTURES:
        path = os.path.join(out, f"{tag}_{bm}x{bn}.wgsl")
        with open(path, "w") as f:
            f.write(kernel(bm, bn, bk, wm, wn, a_global, **options))
        print(path)


if __name__ == "__main__":
    main()
