#!/usr/bin/env bash
# Builds one of the hand-written studies (the GEMMs, and attention_hand), benches/cuda/STUDY.cu,
# for one architecture, prints what ptxas made of each kernel instantiation (registers,
# spills, static shared memory; the dynamic shared memory of each is in the harness's first
# table), then runs it:
# its table (beside cuBLAS) goes to stdout. Exit status: the study's (1 when a check against
# cuBLAS failed).
#
#   bash benches/cuda/gemm_study.sh STUDY ARCH     # e.g. mma_sync_hand 90, wgmma_hand 90a
#
# Environment: NVCC (default: nvcc on PATH, else /usr/local/cuda/bin/nvcc), BUILD_DIR
# (default: target/cuda-bench, under the repository root), MMA_FLUSH_L2=0 to time without
# emptying the L2 before each launch.
set -euo pipefail

study="${1:?usage: gemm_study.sh STUDY ARCH}"
arch="${2:?usage: gemm_study.sh STUDY ARCH}"

root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
cd "$root"

nvcc="${NVCC:-}"
if [[ -z "$nvcc" ]]; then
  if command -v nvcc >/dev/null 2>&1; then
    nvcc="$(command -v nvcc)"
  elif [[ -x /usr/local/cuda/bin/nvcc ]]; then
    nvcc=/usr/local/cuda/bin/nvcc
  else
    echo "nvcc not found: put it on PATH or set NVCC" >&2
    exit 2
  fi
fi
"$nvcc" --version | tail -n 2

# Run against the toolkit's own cuBLAS and runtime even where the loader's path lacks them.
cuda_home="$(dirname "$(dirname "$(readlink -f "$nvcc")")")"
rpath=()
for d in "$cuda_home/lib64" "$cuda_home/targets/x86_64-linux/lib"; do
  [[ -d "$d" ]] && rpath+=(-Xlinker "-rpath=$d")
done

build="${BUILD_DIR:-target/cuda-bench}"
mkdir -p "$build"
log="$build/$study.ptxas.txt"

echo "== nvcc -O3 -gencode=arch=compute_$arch,code=sm_$arch -Xptxas -v (ptxas per kernel)"
if ! "$nvcc" -O3 -std=c++17 -gencode="arch=compute_$arch,code=sm_$arch" -Xptxas -v \
    ${rpath[@]+"${rpath[@]}"} -o "$build/$study" "benches/cuda/$study.cu" -lcublas \
    >"$log" 2>&1; then
  cat "$log" >&2
  echo "build failed" >&2
  exit 2
fi
# Kernel names demangled where c++filt is present; compile times left out.
demangle() { if command -v c++filt >/dev/null 2>&1; then c++filt; else cat; fi; }
grep -v 'Compile time' "$log" | demangle

echo
echo "== $build/$study"
"$build/$study"
