//! The kernels of the seed tutorials (Triton's vector add, fused softmax in its simple and
//! persistent forms, and matmul with grouped ordering), written once with the builder and
//! shared by the examples, the tests and every backend; the fused softmax's baseline, the
//! tutorial's unfused `naive_softmax`; and one kernel beyond the tutorials, a tiled
//! transpose, whose load and store are contiguous along different axes. The next
//! tutorials follow: the low-memory (seeded) dropout, layer norm (forward and backward),
//! fused attention (forward), softmax and layer norm for rows longer than one block, and
//! the grouped GEMM (many matrix products of different shapes in one launch).

mod attention;
mod dropout;
mod grouped_matmul;
mod layer_norm;
mod long_rows;
mod matmul;
mod naive_softmax;
mod softmax;
mod transpose;
mod vector_add;

pub use attention::{attention_forward, AttentionMeta};
pub use dropout::{seeded_dropout, seeded_dropout_walk};
pub use grouped_matmul::{
    grouped_matmul, GroupedLayoutError, GroupedMatmulLayout, GroupedMatmulMeta, GROUPED_MATMUL_ALIGN,
};
pub use layer_norm::{
    layer_norm_backward_dwdb, layer_norm_backward_dx, layer_norm_forward, layer_norm_forward_row,
    layer_norm_forward_row_block, layer_norm_forward_row_one_exchange, layer_norm_forward_rows,
    layer_norm_group_size_m, LayerNormBackwardMeta, LayerNormMeta, RowParams, RowStats,
};
pub use long_rows::{
    fits_one_block, layer_norm_cluster, layer_norm_long, softmax_long, LongRowMeta, ONE_BLOCK_BYTES, WALK_STAGES,
};
pub use matmul::{
    matmul, matmul_block_ptr, matmul_grid, matmul_row_major_args, Activation, MatmulMeta, MATMUL_CONFIGS,
    SEED_MATMUL_CONFIGS,
};
pub use naive_softmax::{naive_softmax_elementwise_grid, NaiveSoftmax, NAIVE_SOFTMAX_ELEMENTWISE_BLOCK};
pub use softmax::{
    softmax, softmax_block, softmax_chunked, softmax_chunks, softmax_chunks_at_most, softmax_cluster,
    softmax_cluster_rows, softmax_num_warps, softmax_persistent, softmax_persistent_staged, softmax_persistent_with,
    softmax_rows, softmax_rows_with, softmax_with, SoftmaxOptions,
};
pub use transpose::{transpose, transpose_grid};
pub use vector_add::vector_add;
