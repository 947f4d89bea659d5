#!/usr/bin/env python3
"""Which disassembly of NVIDIA's Vulkan driver belongs to which rutile kernel, and what its
memory instructions are.

NVIDIA's driver keeps the machine code it compiles in its shader disk cache
(`__GL_SHADER_DISK_CACHE_PATH` picks the folder). The open-source nvcachetools unpack it
(`nvcachedec` on the cache's `.toc` files, `nvucdump` on each object) and `nvdisasm
--binary SM90` (CUDA's) disassembles an object's code section; docs/performance.md, "Read-only
buffers on Vulkan", gives the commands. This script pairs the disassemblies with the kernels
that `RUTILE_DUMP=DIR` wrote: a kernel's `<kernel>.<n>.driver.txt` gives the driver's
"Binary Size", which equals the size of its code (16 bytes an instruction). Several kernels
of one size are listed together.

    python3 benches/vulkan-sass/match.py DUMP_DIR SASS_FILE...

For each kernel with a disassembly it prints the driver's register count and shared memory,
and counts the instructions that say how memory is used: global loads (and how many are
read-only `CONSTANT` or `STRONG`), global stores, `ldmatrix`, shared stores, barriers,
local-memory (spill) traffic and `HMMA`.
"""

import re
import sys
from pathlib import Path

INSTRUCTION = re.compile(r"^\s*/\*[0-9a-f]{4,}\*/\s+(?:@!?U?P\w+\s+)?([A-Z][A-Z0-9_.]*)")


def driver_stats(path: Path) -> dict:
    stats = {}
    for line in path.read_text().splitlines():
        key, _, value = line.partition(":")
        if value.strip().isdigit():
            stats[key.strip()] = int(value)
    return stats


def opcodes(path: Path) -> list:
    return [m.group(1) for m in map(INSTRUCTION.match, path.read_text().splitlines()) if m]


def counts(ops: list) -> str:
    def n(pred):
        return sum(1 for op in ops if pred(op))

    loads = n(lambda o: o.startswith("LDG"))
    return ", ".join(
        [
            f"{loads} LDG ({n(lambda o: o.startswith('LDG') and 'CONSTANT' in o)} CONSTANT, "
            f"{n(lambda o: o.startswith('LDG') and 'STRONG' in o)} STRONG)",
            f"{n(lambda o: o.startswith('STG'))} STG",
            f"{n(lambda o: o.startswith('LDSM'))} LDSM",
            f"{n(lambda o: o.startswith('STS'))} STS",
            f"{n(lambda o: o.startswith('BAR'))} BAR",
            f"{n(lambda o: o.startswith(('LDL', 'STL')))} LDL/STL",
            f"{n(lambda o: o.startswith('HMMA'))} HMMA",
        ]
    )


def main() -> None:
    if len(sys.argv) < 3:
        sys.exit(__doc__)
    dump = Path(sys.argv[1])
    by_size = {}
    for sass in map(Path, sys.argv[2:]):
        ops = opcodes(sass)
        # nvdisasm pads the code with NOPs and a closing branch to a 128-byte multiple, as
        # the driver's size counts it.
        by_size.setdefault(len(ops) * 16, []).append((sass, ops))
    for report in sorted(dump.glob("*.driver.txt")):
        stats = driver_stats(report)
        size = stats.get("Binary Size")
        kernel = report.name[: -len(".driver.txt")]
        for sass, ops in by_size.get(size, []):
            print(
                f"{kernel}: {sass.name}, {stats.get('Register Count', '?')} registers, "
                f"{stats.get('Shared Memory Size', '?')} bytes shared; {counts(ops)}"
            )


if __name__ == "__main__":
    main()
