#!/usr/bin/env bash
# The hand-written FlashAttention-3-style attention study (attention_hand.cu) for sm_90a,
# with cuBLAS's matmul rate in the same run; built and run as the GEMM studies are
# (gemm_study.sh: ptxas per kernel, then the table).
exec bash "$(dirname "${BASH_SOURCE[0]}")/gemm_study.sh" attention_hand 90a
