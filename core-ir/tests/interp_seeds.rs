//! The seed kernels, built by the kernel builder, run by the CPU interpreter against plain
//! Rust references.

use half::f16;
use rutile_ir::interp::{self, ArgValue, Element, FaultKind, HostBuffer, InterpError};
use rutile_ir::seeds::{self, Activation, MatmulMeta};
use rutile_ir::testing::Rng;
use rutile_ir::CacheModifier;
use rutile_ir::ScalarType::{self, F16, F32};

fn ptr(buffer: usize) -> ArgValue {
    ArgValue::Ptr { buffer, offset: 0 }
}

#[test]
fn vector_add_f32_and_f16() {
    let mut rng = Rng::new(1);
    let n = 98_432;
    let x = rng.f32s(n, -100.0, 100.0);
    let y = rng.f32s(n, -100.0, 100.0);
    let kernel = seeds::vector_add(F32, 1024).unwrap();
    let mut buffers = [
        HostBuffer::from_slice(&x),
        HostBuffer::from_slice(&y),
        HostBuffer::zeros(F32, n),
    ];
    let grid = [n.div_ceil(1024) as u32, 1, 1];
    interp::run(
        &kernel,
        grid,
        &[ptr(0), ptr(1), ptr(2), ArgValue::Int(n as i64)],
        &mut buffers,
    )
    .unwrap();
    let z: Vec<f32> = buffers[2].to_vec().unwrap();
    assert!(z
        .iter()
        .zip(x.iter().zip(&y))
        .all(|(&z, (&x, &y))| z.to_bits() == (x + y).to_bits()));

    let n = 1000;
    let x = rng.f16s(n, -1.0, 1.0);
    let y = rng.f16s(n, -1.0, 1.0);
    let kernel = seeds::vector_add(F16, 256).unwrap();
    let mut buffers = [
        HostBuffer::from_slice(&x),
        HostBuffer::from_slice(&y),
        HostBuffer::zeros(F16, n),
    ];
    interp::run(
        &kernel,
        [4, 1, 1],
        &[ptr(0), ptr(1), ptr(2), ArgValue::Int(n as i64)],
        &mut buffers,
    )
    .unwrap();
    let z: Vec<f16> = buffers[2].to_vec().unwrap();
    assert!(z.iter().zip(x.iter().zip(&y)).all(|(&z, (&x, &y))| z == x + y));
}

#[test]
fn vector_add_out_of_bounds_names_the_parameter() {
    let kernel = seeds::vector_add(F32, 1024).unwrap();
    // n says 2000, but x holds only 1500 elements.
    let mut buffers = [
        HostBuffer::zeros(F32, 1500),
        HostBuffer::zeros(F32, 2000),
        HostBuffer::zeros(F32, 2000),
    ];
    let err = interp::run(
        &kernel,
        [2, 1, 1],
        &[ptr(0), ptr(1), ptr(2), ArgValue::Int(2000)],
        &mut buffers,
    )
    .unwrap_err();
    let msg = err.to_string();
    assert!(msg.starts_with("load at "), "{msg}");
    assert!(msg.contains("vector_add.rs:"), "{msg}");
    assert!(
        msg.ends_with("program (1, 0, 0): element offset 1500 is outside buffer 0 (`x_ptr`, 1500 elements)"),
        "{msg}"
    );
    assert!(matches!(
        err,
        InterpError::Fault {
            kind: FaultKind::OutOfBounds,
            op: "load",
            ..
        }
    ));
}

fn softmax_reference(x: &[f32], rows: usize, cols: usize) -> Vec<f32> {
    let mut out = vec![0.0; rows * cols];
    for r in 0..rows {
        let row = &x[r * cols..(r + 1) * cols];
        let max = row.iter().fold(f64::NEG_INFINITY, |m, &v| m.max(v as f64));
        let sum: f64 = row.iter().map(|&v| (v as f64 - max).exp()).sum();
        for c in 0..cols {
            out[r * cols + c] = ((row[c] as f64 - max).exp() / sum) as f32;
        }
    }
    out
}

/// The softmax kernels' arguments for a contiguous `rows x cols` matrix in buffers 0
/// (output) and 1 (input).
fn softmax_args(rows: usize, cols: usize) -> [ArgValue; 6] {
    let (r, c) = (ArgValue::Int(rows as i64), ArgValue::Int(cols as i64));
    [ptr(0), ptr(1), c, c, r, c]
}

#[test]
fn softmax_simple_and_persistent() {
    let (rows, cols) = (37, 100);
    let mut rng = Rng::new(2);
    let x = rng.f32s(rows * cols, -5.0, 5.0);
    let want = softmax_reference(&x, rows, cols);
    let block = seeds::softmax_block(cols as u32);
    let args = softmax_args(rows, cols);
    let full_division = seeds::SoftmaxOptions {
        ieee_rounding: false,
        ..Default::default()
    };
    for (kernel, grid) in [
        (seeds::softmax(block).unwrap(), rows as u32),
        (seeds::softmax_persistent(block).unwrap(), 8),
        (seeds::softmax_with(block, full_division).unwrap(), rows as u32),
        (
            seeds::softmax_rows_with(4, block, full_division).unwrap(),
            (rows as u32).div_ceil(4),
        ),
    ] {
        let mut buffers = [HostBuffer::zeros(F32, rows * cols), HostBuffer::from_slice(&x)];
        interp::run(&kernel, [grid, 1, 1], &args, &mut buffers).unwrap();
        let got: Vec<f32> = buffers[0].to_vec().unwrap();
        for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-6 * w.abs().max(1e-3),
                "{} [{i}]: {g} vs {w}",
                kernel.name
            );
        }
    }
}

#[test]
fn softmax_chunks_cover_the_row_in_few_pieces() {
    assert_eq!(seeds::softmax_chunks(1), vec![1]);
    assert_eq!(seeds::softmax_chunks(781), vec![512, 256, 128]);
    assert_eq!(seeds::softmax_chunks(1024), vec![1024]);
    assert_eq!(seeds::softmax_chunks(1152), vec![1024, 128]);
    assert_eq!(seeds::softmax_chunks(4224), vec![4096, 512]);
    assert_eq!(seeds::softmax_chunks(12672), vec![8192, 4096, 1024]);
    for n in (1..20000).step_by(37) {
        let chunks = seeds::softmax_chunks(n);
        let sum: u32 = chunks.iter().sum();
        assert!(
            sum >= n && sum - n < seeds::softmax_block(n) / 16 + 128,
            "{n}: {chunks:?}"
        );
        assert!(
            chunks.len() <= 4 && chunks.iter().all(|c| c.is_power_of_two()),
            "{n}: {chunks:?}"
        );
        assert!(chunks.windows(2).all(|w| w[0] > w[1]), "{n}: {chunks:?}");
        for pieces in 1..=5 {
            let chunks = seeds::softmax_chunks_at_most(n, pieces);
            let sum: u32 = chunks.iter().sum();
            assert!(
                sum >= n && sum <= seeds::softmax_block(n),
                "{n} in {pieces}: {chunks:?}"
            );
            assert!(chunks.len() <= pieces as usize, "{n} in {pieces}: {chunks:?}");
        }
    }
    assert_eq!(seeds::softmax_chunks_at_most(10368, 2), vec![8192, 4096]);
    assert_eq!(seeds::softmax_chunks_at_most(10368, 1), vec![16384]);
    assert_eq!(seeds::softmax_chunks_at_most(1152, 0), vec![2048]);
}

/// The chunked form computes the same softmax at ragged widths, masks included: the last
/// piece runs past the row, and columns past the row are left as they were.
#[test]
fn softmax_chunked_matches_the_reference() {
    let rows = 5;
    for cols in [1usize, 100, 781, 1152, 1300] {
        let x = Rng::new(cols as u64).f32s(rows * cols, -5.0, 5.0);
        let want = softmax_reference(&x, rows, cols);
        let args = softmax_args(rows, cols);
        let chunks = seeds::softmax_chunks(cols as u32);
        let kernel = seeds::softmax_chunked(&chunks, CacheModifier::Default).unwrap();
        let mut buffers = [
            HostBuffer::from_slice(&vec![f32::NAN; rows * cols]),
            HostBuffer::from_slice(&x),
        ];
        interp::run(&kernel, [rows as u32, 1, 1], &args, &mut buffers).unwrap();
        let got: Vec<f32> = buffers[0].to_vec().unwrap();
        for (i, (&g, &w)) in got.iter().zip(&want).enumerate() {
            assert!(
                (g - w).abs() <= 1e-6 * w.abs().max(1e-3),
                "{cols} {chunks:?} [{i}]: {g} vs {w}"
            );
        }
    }
    let e = seeds::softmax_chunked(&[], CacheModifier::Default).unwrap_err();
    assert!(e.to_string().contains("at least one piece"), "{e}");
    let e = seeds::softmax_chunked(&[1024, 100], CacheModifier::Default).unwrap_err();
    assert!(e.to_string().contains("arange"), "{e}");
}

/// `C = act(A @ B)` with f32 accumulation in k order, as the interpreter's dot does, rounded
/// to f16.
fn matmul_reference(a: &[f16], b: &[f16], m: usize, n: usize, k: usize, act: Option<Activation>) -> Vec<f16> {
    let mut c = vec![f16::ZERO; m * n];
    for i in 0..m {
        for j in 0..n {
            let mut acc = 0f32;
            for kk in 0..k {
                acc += a[i * k + kk].to_f32() * b[kk * n + j].to_f32();
            }
            if act == Some(Activation::LeakyRelu) && acc < 0.0 {
                acc *= 0.01;
            }
            c[i * n + j] = f16::from_f32(acc);
        }
    }
    c
}

fn run_matmul(meta: &MatmulMeta, a: &[f16], b: &[f16], m: usize, n: usize, k: usize, b_col_major: bool) -> Vec<f16> {
    let kernel = seeds::matmul(meta).unwrap();
    // B is given row-major; a column-major copy is read through swapped strides.
    let (b_data, stride_bk, stride_bn) = if b_col_major {
        let mut t = vec![f16::ZERO; k * n];
        for kk in 0..k {
            for j in 0..n {
                t[j * k + kk] = b[kk * n + j];
            }
        }
        (t, 1, k)
    } else {
        (b.to_vec(), n, 1)
    };
    let mut buffers = [
        HostBuffer::from_slice(a),
        HostBuffer::from_slice(&b_data),
        HostBuffer::zeros(meta.output, m * n),
    ];
    let int = |v: usize| ArgValue::Int(v as i64);
    let args = [
        ptr(0),
        ptr(1),
        ptr(2),
        int(m),
        int(n),
        int(k),
        int(k),
        int(1),
        int(stride_bk),
        int(stride_bn),
        int(n),
        int(1),
    ];
    let grid = [seeds::matmul_grid(meta, m as u32, n as u32), 1, 1];
    interp::run(&kernel, grid, &args, &mut buffers).unwrap();
    buffers[2].to_vec().unwrap()
}

#[test]
fn matmul_with_ragged_edges_strides_and_activation() {
    let (m, n, k) = (100, 72, 50);
    let mut rng = Rng::new(3);
    let a = rng.f16s(m * k, -1.0, 1.0);
    let b = rng.f16s(k * n, -1.0, 1.0);
    let mut meta = MatmulMeta::fp16(32, 32, 16);
    meta.group_m = 2;
    assert_eq!(
        run_matmul(&meta, &a, &b, m, n, k, false),
        matmul_reference(&a, &b, m, n, k, None)
    );
    assert_eq!(
        run_matmul(&meta, &a, &b, m, n, k, true),
        matmul_reference(&a, &b, m, n, k, None)
    );
    meta.activation = Some(Activation::LeakyRelu);
    assert_eq!(
        run_matmul(&meta, &a, &b, m, n, k, false),
        matmul_reference(&a, &b, m, n, k, meta.activation)
    );
}

#[test]
fn matmul_f32_output() {
    let (m, n, k) = (64, 64, 64);
    let mut rng = Rng::new(4);
    let a = rng.f16s(m * k, -1.0, 1.0);
    let b = rng.f16s(k * n, -1.0, 1.0);
    let meta = MatmulMeta {
        output: ScalarType::F32,
        ..MatmulMeta::fp16(32, 16, 32)
    };
    let kernel = seeds::matmul(&meta).unwrap();
    let mut buffers = [
        HostBuffer::from_slice(&a),
        HostBuffer::from_slice(&b),
        HostBuffer::zeros(F32, m * n),
    ];
    let args = rutile_ir::testing::row_major_matmul_args(m, n, k);
    interp::run(&kernel, [seeds::matmul_grid(&meta, 64, 64), 1, 1], &args, &mut buffers).unwrap();
    let got: Vec<f32> = buffers[2].to_vec().unwrap();
    for i in 0..m {
        for j in 0..n {
            let mut acc = 0f32;
            for kk in 0..k {
                acc += a[i * k + kk].to_f32() * b[kk * n + j].to_f32();
            }
            assert_eq!(got[i * n + j].to_bits(), acc.to_bits(), "c[{i}, {j}]");
        }
    }
}

/// `x^T` for `x` (`m x n`, row stride `stride_x`) into an `n x m` matrix with row stride
/// `stride_out`, whose padding (columns `m..stride_out`) is `pad`.
fn transpose_reference<T: Copy>(x: &[T], m: usize, n: usize, stride_x: usize, stride_out: usize, pad: T) -> Vec<T> {
    let mut out = vec![pad; n * stride_out];
    for i in 0..m {
        for j in 0..n {
            out[j * stride_out + i] = x[i * stride_x + j];
        }
    }
    out
}

/// The transpose seed in `block_m x block_n` tiles of `x` (`m x n`, row stride `stride_x`)
/// into an `n x m` output with row stride `stride_out`, poisoned with `poison` beforehand.
fn run_transpose<T: Element>(
    x: &[T],
    (m, n): (usize, usize),
    (stride_x, stride_out): (usize, usize),
    (block_m, block_n): (u32, u32),
    poison: T,
) -> Vec<T> {
    let kernel = seeds::transpose(T::TYPE, block_m, block_n).unwrap();
    let mut buffers = [
        HostBuffer::from_slice(x),
        HostBuffer::from_slice(&vec![poison; n * stride_out]),
    ];
    let int = |v: usize| ArgValue::Int(v as i64);
    let args = [ptr(0), ptr(1), int(m), int(n), int(stride_x), int(stride_out)];
    let grid = seeds::transpose_grid(m as u32, n as u32, block_m, block_n);
    interp::run(&kernel, grid, &args, &mut buffers).unwrap();
    buffers[1].to_vec().unwrap()
}

/// The tiled transpose at ragged sizes (partial tiles along both axes, masked), square and
/// oblong tiles, contiguous and padded rows, f32 and f16: exactly the input, every output
/// element written (the output starts as NaN, which equals nothing) and the padding left as
/// it was.
#[test]
fn transpose_at_ragged_sizes_and_strides() {
    let mut rng = Rng::new(6);
    for (m, n) in [(100usize, 77usize), (77, 100), (64, 64), (1, 33), (33, 1)] {
        for (stride_x, stride_out) in [(n, m), (n + 3, m + 5)] {
            let x = rng.f32s(m * stride_x, -100.0, 100.0);
            let want = transpose_reference(&x, m, n, stride_x, stride_out, f32::NAN);
            for tiles in [(32, 32), (64, 64), (16, 64), (64, 8)] {
                let got = run_transpose(&x, (m, n), (stride_x, stride_out), tiles, f32::NAN);
                let same = got.iter().zip(&want).all(|(g, w)| g.to_bits() == w.to_bits());
                assert!(
                    same,
                    "f32 {m}x{n}, strides {stride_x}/{stride_out}, tiles {tiles:?}: differs"
                );
            }
            let h = rng.f16s(m * stride_x, -2.0, 2.0);
            let want = transpose_reference(&h, m, n, stride_x, stride_out, f16::NAN);
            for tiles in [(32, 32), (64, 64)] {
                let got = run_transpose(&h, (m, n), (stride_x, stride_out), tiles, f16::NAN);
                let same = got.iter().zip(&want).all(|(g, w)| g.to_bits() == w.to_bits());
                assert!(
                    same,
                    "f16 {m}x{n}, strides {stride_x}/{stride_out}, tiles {tiles:?}: differs"
                );
            }
        }
    }
}

/// The transpose's accesses are contiguous along different axes: the load's pointers
/// advance by one along axis 1 of the tile, the store's along axis 0. This is what makes it
/// a test of the lowering's coalescing, so it must not drift into a `trans`.
#[test]
fn transpose_is_written_without_trans() {
    let kernel = seeds::transpose(F32, 64, 64).unwrap();
    let ops: Vec<&str> = kernel.insts.iter().map(|(_, inst)| inst.op.name()).collect();
    assert!(!ops.contains(&"permute"), "{kernel}");
    assert_eq!(ops.iter().filter(|&&o| o == "load").count(), 1, "{kernel}");
    assert_eq!(ops.iter().filter(|&&o| o == "store").count(), 1, "{kernel}");
}
