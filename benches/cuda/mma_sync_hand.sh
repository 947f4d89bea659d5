#!/usr/bin/env bash
# Builds benches/cuda/mma_sync_hand.cu (hand-written mma.sync / ldmatrix / cp.async fp16 GEMM
# beside cuBLAS) for sm_90, prints what ptxas made of each kernel instantiation (registers,
# spills, static shared memory; the dynamic shared memory of each is in the harness's first
# table), then runs the harness, whose table goes to stdout. Exit status: the harness's
# (1 when a check against cuBLAS failed).
#
#   bash benches/cuda/mma_sync_hand.sh
#
# Environment: NVCC (default: nvcc on PATH, else /usr/local/cuda/bin/nvcc), BUILD_DIR
# (default: target/cuda-bench, under the repository root), MMA_FLUSH_L2=0 to time without
# emptying the L2 before each launch.
set -euo pipefail

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
log="$build/mma_sync_hand.ptxas.txt"

echo "== nvcc -O3 -gencode=arch=compute_90,code=sm_90 -Xptxas -v (ptxas per kernel)"
if ! "$nvcc" -O3 -std=c++17 -gencode=arch=compute_90,code=sm_90 -Xptxas -v \
    ${rpath[@]+"${rpath[@]}"} -o "$build/mma_sync_hand" benches/cuda/mma_sync_hand.cu -lcublas \
    >"$log" 2>&1; then
  cat "$log" >&2
  echo "build failed" >&2
  exit 2
fi
# Kernel names demangled where c++filt is present; compile times left out.
demangle() { if command -v c++filt >/dev/null 2>&1; then c++filt; else cat; fi; }
echo "(mma_sync_gemm<V, Config<BM, BN, BK, WARPS_M, WARPS_N, STAGES>>: V = 0 naive_smem, 1 ldmatrix, 2 cp_async)"
grep -v 'Compile time' "$log" | demangle

echo
echo "== $build/mma_sync_hand"
"$build/mma_sync_hand"
