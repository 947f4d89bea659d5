#!/usr/bin/env bash
# The mma.sync / ldmatrix / cp.async study (mma_sync_hand.cu) for sm_90 beside cuBLAS; see
# gemm_study.sh. Kernels are mma_sync_gemm<V, Config<BM, BN, BK, WARPS_M, WARPS_N, STAGES>>
# with V = 0 naive_smem, 1 ldmatrix, 2 cp_async.
exec bash "$(dirname "${BASH_SOURCE[0]}")/gemm_study.sh" mma_sync_hand 90
