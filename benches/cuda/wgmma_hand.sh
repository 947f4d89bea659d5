#!/usr/bin/env bash
# The wgmma study (wgmma_hand.cu) for sm_90a beside cuBLAS; see gemm_study.sh. Kernels are
# wgmma_gemm<Config<BM, BN, WARPGROUPS, STAGES, WAIT>>.
exec bash "$(dirname "${BASH_SOURCE[0]}")/gemm_study.sh" wgmma_hand 90a
