//! PTX generation from rutile per-thread code (filled in by the CUDA-path work).
