#!/usr/bin/env bash
# The TMA / warp-specialized / persistent wgmma study (wgmma_tma_hand.cu) for sm_90a beside
# cuBLAS; see gemm_study.sh. Kernels are gemm_tma<Config<BM, BN, STAGES, TMA>> and
# gemm_ws<Config<BM, BN, STAGES, WS or WS_PERSIST>>.
exec bash "$(dirname "${BASH_SOURCE[0]}")/gemm_study.sh" wgmma_tma_hand 90a
