//! Block pointers (`make_block_ptr`, `advance`, `load_block` and `store_block` with
//! `boundary_check`) and tensor descriptors: the interpreter against Rust references of
//! Triton's semantics on ragged matrices with windows that leave them on every side, the
//! lowering (Vulkan and NVIDIA targets, in the simulator) against the interpreter, and
//! their mistakes as errors that name them.

use rutile_ir::interp::{self, simt, ArgValue, Element, HostBuffer};
use rutile_ir::lower::lower;
use rutile_ir::target::{Specialization, Target};
use rutile_ir::testing::Rng;
use rutile_ir::ScalarType::{F32, I32};
use rutile_ir::{Kernel, KernelBuilder, Padding, ScalarType, Value};

fn ptr(buffer: usize) -> ArgValue {
    ArgValue::Ptr { buffer, offset: 0 }
}

/// Runs `kernel` on `grid` programs in the interpreter, and lowered for a few targets in the
/// simulator, which must leave every buffer with the same bytes; returns the interpreter's
/// buffers.
fn run(kernel: &Kernel, grid: u32, args: &[ArgValue], buffers: Vec<HostBuffer>) -> Vec<HostBuffer> {
    let mut want = buffers.clone();
    interp::run(kernel, [grid, 1, 1], args, &mut want).unwrap_or_else(|e| panic!("interpreter: {e}\n{kernel}"));
    for target in [
        Target::vulkan(32, 4, 96 * 1024),
        Target::vulkan(16, 1, 96 * 1024),
        Target::nvidia(4, 48 * 1024),
    ] {
        let at = format!("{} warps of {}", target.num_warps, target.warp_size);
        let lowered = lower(kernel, &target, &Specialization::none(args.len()))
            .unwrap_or_else(|e| panic!("lowering for {at}: {e}\n{kernel}"));
        let mut got = buffers.clone();
        simt::run_threads(&lowered, [grid, 1, 1], args, &mut got).unwrap_or_else(|e| panic!("simulated, {at}: {e}"));
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g.as_bytes(), w.as_bytes(), "buffer {i} simulated for {at}\n{kernel}");
        }
    }
    want
}

/// A ragged matrix of `rows x cols` stored with row stride `stride` in `alloc_rows` rows;
/// the elements outside the matrix are `pad`.
struct Matrix {
    rows: usize,
    cols: usize,
    stride: usize,
    alloc_rows: usize,
    data: Vec<i32>,
}

impl Matrix {
    fn random(rng: &mut Rng, rows: usize, cols: usize, stride: usize, alloc_rows: usize, pad: i32) -> Matrix {
        let mut data = vec![pad; stride * alloc_rows];
        for r in 0..rows {
            for c in 0..cols {
                data[r * stride + c] = rng.i32s(1, -1000, 1000)[0];
            }
        }
        Matrix {
            rows,
            cols,
            stride,
            alloc_rows,
            data,
        }
    }
    fn at(&self, r: i64, c: i64) -> Option<i32> {
        (r >= 0 && c >= 0 && (r as usize) < self.alloc_rows && (c as usize) < self.stride)
            .then(|| self.data[r as usize * self.stride + c as usize])
    }
    fn inside(&self, r: i64, c: i64) -> bool {
        r >= 0 && c >= 0 && (r as usize) < self.rows && (c as usize) < self.cols
    }
}

const BM: u32 = 16;
const BN: u32 = 32;

/// The windows of the loads: program `pid`'s starts at row `(pid / blocks_n) * row_step -
/// row_shift` and column `(pid % blocks_n) * BN - 5`, on `grid` programs.
#[derive(Clone, Copy)]
struct Windows {
    blocks_n: usize,
    grid: usize,
    row_step: i32,
    row_shift: i32,
}

impl Windows {
    /// Windows from the matrix's corner moved by `(-3, -5)`, so that they leave it on every
    /// side.
    fn around(blocks_n: usize, grid: usize) -> Windows {
        Windows {
            blocks_n,
            grid,
            row_step: BM as i32,
            row_shift: 3,
        }
    }

    /// Program `pid`'s window's first row and column.
    fn origin(self, pid: usize) -> (i64, i64) {
        (
            (pid / self.blocks_n) as i64 * self.row_step as i64 - self.row_shift as i64,
            (pid % self.blocks_n) as i64 * BN as i64 - 5,
        )
    }

    /// Each program loads its `BM x BN` window of `X` (`rows x cols`, row stride `stride`)
    /// through a block pointer, checking `check`, and stores it densely to its slot of `Y`.
    fn kernel(self, check: &'static [u32], padding: Padding, elem: ScalarType) -> Kernel {
        Kernel::build("windows", |k| {
            let (x, y) = (k.arg_ptr("X", elem), k.arg_ptr("Y", elem));
            let (rows, cols, stride) = (k.arg_i32("rows"), k.arg_i32("cols"), k.arg_i32("stride"));
            let pid = k.program_id(0);
            let blocks_n = self.blocks_n as i32;
            let (r0, c0) = (
                (pid / blocks_n) * self.row_step - self.row_shift,
                (pid % blocks_n) * BN as i32 - 5,
            );
            let p = k.make_block_ptr(x, [rows, cols], (stride, 1), [r0, c0], &[BM, BN], &[1, 0]);
            let dense = k.arange(0, BM as i32).expand_dims(1) * BN as i32 + k.arange(0, BN as i32).expand_dims(0);
            k.store(y + pid * (BM * BN) as i32 + dense, k.load_block(&p, check, padding));
        })
        .unwrap_or_else(|e| panic!("{e}"))
    }

    /// Loads the windows of `x` (`rows x cols`, row stride `stride`) checking `check`; calls
    /// `expect` with each element's tensor row and column and what the program loaded.
    fn load<T: Element>(
        self,
        (check, padding): (&'static [u32], Padding),
        x: &[T],
        (rows, cols, stride): (usize, usize, usize),
        mut expect: impl FnMut(i64, i64, T),
    ) {
        let args = [
            ptr(0),
            ptr(1),
            ArgValue::Int(rows as i64),
            ArgValue::Int(cols as i64),
            ArgValue::Int(stride as i64),
        ];
        let out = HostBuffer::zeros(T::TYPE, self.grid * (BM * BN) as usize);
        let kernel = self.kernel(check, padding, T::TYPE);
        let bufs = run(&kernel, self.grid as u32, &args, vec![HostBuffer::from_slice(x), out]);
        let got = bufs[1].to_vec::<T>().unwrap();
        for pid in 0..self.grid {
            let (r0, c0) = self.origin(pid);
            for i in 0..BM as i64 {
                for j in 0..BN as i64 {
                    expect(
                        r0 + i,
                        c0 + j,
                        got[pid * (BM * BN) as usize + (i * BN as i64 + j) as usize],
                    );
                }
            }
        }
    }
}

#[test]
fn a_block_pointer_loads_its_window_checking_the_dimensions_asked() {
    let mut rng = Rng::new(41);
    let m = Matrix::random(&mut rng, 37, 45, 48, 37, -77);
    for check in [&[0u32, 1][..], &[1, 0]] {
        let dims = (m.rows, m.cols, m.stride);
        Windows::around(2, 6).load((check, Padding::Zero), &m.data, dims, |r, c, got: i32| {
            let want = if m.inside(r, c) { m.at(r, c).unwrap() } else { 0 };
            assert_eq!(got, want, "check {check:?}, element ({r}, {c})");
        });
    }
}

/// Columns checked, rows not: windows whose rows stay in the buffer (it holds 48 rows of
/// which the matrix is 37) read its rows past the matrix as they are, and nothing outside
/// the columns.
#[test]
fn unchecked_dimensions_are_read_as_they_are() {
    let mut rng = Rng::new(47);
    let m = Matrix::random(&mut rng, 37, 45, 48, 48, -77);
    let windows = Windows {
        blocks_n: 2,
        grid: 10,
        row_step: 8,
        row_shift: 0,
    };
    windows.load(
        (&[1], Padding::Zero),
        &m.data,
        (m.rows, m.cols, m.stride),
        |r, c, got: i32| {
            let want = if c >= 0 && (c as usize) < m.cols {
                m.at(r, c).unwrap()
            } else {
                0
            };
            assert_eq!(got, want, "element ({r}, {c})");
        },
    );
}

#[test]
fn nan_padding_fills_what_is_outside() {
    let mut rng = Rng::new(42);
    let (rows, cols) = (20usize, 24usize);
    let x = rng.f32s(rows * cols, -2.0, 2.0);
    Windows::around(1, 2).load((&[0, 1], Padding::Nan), &x, (rows, cols, cols), |r, c, got: f32| {
        if r >= 0 && c >= 0 && (r as usize) < rows && (c as usize) < cols {
            assert_eq!(got, x[r as usize * cols + c as usize]);
        } else {
            assert!(got.is_nan(), "({r}, {c}) is {got}, outside the matrix");
        }
    });
}

#[test]
fn a_block_store_writes_only_inside_the_checked_dimensions() {
    let mut rng = Rng::new(43);
    let m = Matrix::random(&mut rng, 37, 45, 48, 37, -77);
    let (blocks_n, grid) = (2usize, 6usize);
    // Each program adds its id to its window and stores it back through a block pointer
    // into Y (Y starts as the sentinel 99 everywhere, padding columns included).
    let kernel = Kernel::build("store_windows", |k| {
        let (x, y) = (k.arg_ptr("X", I32), k.arg_ptr("Y", I32));
        let (rows, cols, stride, blocks_n) = (
            k.arg_i32("rows"),
            k.arg_i32("cols"),
            k.arg_i32("stride"),
            k.arg_i32("blocks_n"),
        );
        let pid = k.program_id(0);
        let (r0, c0) = ((pid / blocks_n) * BM as i32 - 3, (pid % blocks_n) * BN as i32 - 5);
        let src = k.make_block_ptr(x, [rows, cols], (stride, 1), [r0, c0], &[BM, BN], &[1, 0]);
        let dst = k.make_block_ptr(y, [rows, cols], (stride, 1), [r0, c0], &[BM, BN], &[1, 0]);
        k.store_block(&dst, k.load_block(&src, &[0, 1], Padding::Zero) + pid * 1000, &[0, 1]);
    })
    .unwrap();
    let args = [
        ptr(0),
        ptr(1),
        ArgValue::Int(m.rows as i64),
        ArgValue::Int(m.cols as i64),
        ArgValue::Int(m.stride as i64),
        ArgValue::Int(blocks_n as i64),
    ];
    let bufs = run(
        &kernel,
        grid as u32,
        &args,
        vec![
            HostBuffer::from_slice(&m.data),
            HostBuffer::from_slice(&vec![99i32; m.data.len()]),
        ],
    );
    let got = bufs[1].to_vec::<i32>().unwrap();
    let mut want = vec![99i32; m.data.len()];
    for pid in 0..grid {
        let (r0, c0) = Windows::around(blocks_n, grid).origin(pid);
        for i in 0..BM as i64 {
            for j in 0..BN as i64 {
                let (r, c) = (r0 + i, c0 + j);
                if m.inside(r, c) {
                    want[r as usize * m.stride + c as usize] = m.at(r, c).unwrap() + pid as i32 * 1000;
                }
            }
        }
    }
    assert_eq!(got, want);
}

#[test]
fn advance_walks_a_loop_over_the_columns() {
    let mut rng = Rng::new(44);
    // Row sums of a 40 x 150 matrix, each program's 16 rows walked in blocks of 32 columns
    // by a block pointer advanced by the loop's own variable.
    let m = Matrix::random(&mut rng, 40, 150, 150, 40, 0);
    let grid = 3usize;
    let kernel = Kernel::build("row_sums", |k| {
        let (x, y) = (k.arg_ptr("X", I32), k.arg_ptr("Y", I32));
        let (rows, cols) = (k.arg_i32("rows"), k.arg_i32("cols"));
        let pid = k.program_id(0);
        let start = k.make_block_ptr(
            x,
            [rows, cols],
            [cols, k.scalar(1, I32)],
            [pid * BM as i32, k.scalar(0, I32)],
            &[BM, BN],
            &[1, 0],
        );
        let acc = k.zeros(&[BM, BN], I32);
        let sums = k.for_range(0, cols, BN as i32, &[acc], |c, acc| {
            vec![acc[0] + k.load_block(&start.advance((0, c)), &[0, 1], Padding::Zero)]
        });
        let out = k.make_block_ptr(y, [rows], [1], [pid * BM as i32], &[BM], &[0]);
        k.store_block(&out, sums[0].sum(1), &[0]);
    })
    .unwrap();
    let args = [
        ptr(0),
        ptr(1),
        ArgValue::Int(m.rows as i64),
        ArgValue::Int(m.cols as i64),
    ];
    let bufs = run(
        &kernel,
        grid as u32,
        &args,
        vec![HostBuffer::from_slice(&m.data), HostBuffer::from_slice(&[-1i32; 48])],
    );
    let got = bufs[1].to_vec::<i32>().unwrap();
    for (r, &g) in got.iter().enumerate() {
        let want = if r < m.rows {
            (0..m.cols).map(|c| m.data[r * m.cols + c]).sum()
        } else {
            -1
        };
        assert_eq!(g, want, "row {r}");
    }
}

#[test]
fn tensor_descriptors_copy_a_ragged_matrix_in_blocks() {
    let mut rng = Rng::new(45);
    let m = Matrix::random(&mut rng, 37, 45, 48, 37, -77);
    let (blocks_m, blocks_n) = (3i32, 2i32);
    let kernel = Kernel::build("descriptor_copy", |k| {
        let (x, y) = (k.arg_ptr("X", I32), k.arg_ptr("Y", I32));
        let (rows, cols, stride) = (k.arg_i32("rows"), k.arg_i32("cols"), k.arg_i32("stride"));
        let dx = k.make_tensor_descriptor(x, [rows, cols], (stride, 1), &[BM, BN]);
        let dy = k.make_tensor_descriptor(y, [rows, cols], (stride, 1), &[BM, BN]);
        let pid = k.program_id(0);
        let at = [(pid / blocks_n) * BM as i32, (pid % blocks_n) * BN as i32];
        dy.store(at, -dx.load(at));
    })
    .unwrap();
    let args = [
        ptr(0),
        ptr(1),
        ArgValue::Int(m.rows as i64),
        ArgValue::Int(m.cols as i64),
        ArgValue::Int(m.stride as i64),
    ];
    let bufs = run(
        &kernel,
        (blocks_m * blocks_n) as u32,
        &args,
        vec![
            HostBuffer::from_slice(&m.data),
            HostBuffer::from_slice(&vec![5i32; m.data.len()]),
        ],
    );
    let got = bufs[1].to_vec::<i32>().unwrap();
    for r in 0..m.alloc_rows {
        for c in 0..m.stride {
            let want = if m.inside(r as i64, c as i64) {
                -m.data[r * m.stride + c]
            } else {
                5
            };
            assert_eq!(got[r * m.stride + c], want, "({r}, {c})");
        }
    }
}

#[test]
fn one_and_three_dimensional_windows() {
    let mut rng = Rng::new(46);
    // A 5 x 6 x 7 tensor (strides 42, 7, 1); a 4 x 4 x 8 window at (-1, 3, -2) checked on
    // every dimension, and a 1-D window of 64 at 20 of its 210 elements.
    let x = rng.i32s(210, -50, 50);
    let kernel = Kernel::build("windows_3d", |k| {
        let (x, y, z) = (k.arg_ptr("X", I32), k.arg_ptr("Y", I32), k.arg_ptr("Z", I32));
        let p = k.make_block_ptr(x, [5, 6, 7], [42, 7, 1], [-1, 3, -2], &[4, 4, 8], &[2, 1, 0]);
        let i = k.arange(0, 4).expand_dims(1).expand_dims(2) * 32;
        let j = k.arange(0, 4).expand_dims(0).expand_dims(2) * 8;
        let l = k.arange(0, 8).expand_dims(0).expand_dims(1);
        k.store(y + (i + j + l), k.load_block(&p, &[0, 1, 2], Padding::Zero));
        let flat = k.make_block_ptr(x, [210], [1], [20], &[64], &[0]);
        k.store(z + k.arange(0, 64), k.load_block(&flat, &[0], Padding::Zero) * 2);
    })
    .unwrap();
    let bufs = run(
        &kernel,
        1,
        &[ptr(0), ptr(1), ptr(2)],
        vec![
            HostBuffer::from_slice(&x),
            HostBuffer::zeros(I32, 128),
            HostBuffer::zeros(I32, 64),
        ],
    );
    let y = bufs[1].to_vec::<i32>().unwrap();
    for a in 0..4i64 {
        for b in 0..4i64 {
            for c in 0..8i64 {
                let (p, q, r) = (a - 1, b + 3, c - 2);
                let inside = (0..5).contains(&p) && (0..6).contains(&q) && (0..7).contains(&r);
                let want = if inside { x[(p * 42 + q * 7 + r) as usize] } else { 0 };
                assert_eq!(y[(a * 32 + b * 8 + c) as usize], want, "({p}, {q}, {r})");
            }
        }
    }
    let z = bufs[2].to_vec::<i32>().unwrap();
    assert_eq!(z, (20..84).map(|i| x[i] * 2).collect::<Vec<_>>());
}

/// The build error of a kernel over a pointer `x` to f32 and an i32 pointer `n`.
fn build_error(f: impl for<'b> FnOnce(&'b KernelBuilder, Value<'b>, Value<'b>)) -> String {
    Kernel::build("bad", |k| {
        let (x, n) = (k.arg_ptr("x", F32), k.arg_ptr("n", I32));
        f(k, x, n);
    })
    .expect_err("the kernel is invalid")
    .to_string()
}

#[test]
fn mistakes_are_errors_that_name_the_construct() {
    let cases: Vec<(String, &[&str])> = vec![
        (
            build_error(|k, x, _| {
                k.make_block_ptr(x, [4, 4], [4], [0, 0], &[4, 4], &[1, 0]);
            }),
            &["make_block_ptr", "`strides` has 1 dimensions where `block_shape` has 2"],
        ),
        (
            build_error(|k, x, _| {
                k.make_block_ptr(x, [4, 4], [4, 1], [0, 0], &[4, 4], &[0, 0]);
            }),
            &["make_block_ptr", "`order` [0, 0] is not a permutation"],
        ),
        (
            build_error(|k, x, _| {
                k.make_block_ptr(x, [4, 4], [4, 1], [0, 0], &[4, 6], &[1, 0]);
            }),
            &["make_block_ptr", "powers of two"],
        ),
        (
            build_error(|k, x, _| {
                let v = k.load(x);
                k.make_block_ptr(v, [4], [1], [0], &[4], &[0]);
            }),
            &["make_block_ptr", "`base` must be a pointer", "f32"],
        ),
        (
            build_error(|k, x, _| {
                let off = k.load(x);
                k.make_block_ptr(x, [4], [1], [off], &[4], &[0]);
            }),
            &["make_block_ptr", "`offsets[0]` must be a scalar integer", "f32"],
        ),
        (
            build_error(|k, x, _| {
                let p = k.make_block_ptr(x, [4, 4], [4, 1], [0, 0], &[4, 4], &[1, 0]);
                let _ = k.load_block(&p, &[2], Padding::Zero);
            }),
            &["load_block", "`boundary_check` names dimension 2 of a block of rank 2"],
        ),
        (
            build_error(|k, _, n| {
                let p = k.make_block_ptr(n, [4], [1], [0], &[4], &[0]);
                let _ = k.load_block(&p, &[0], Padding::Nan);
            }),
            &["load_block", "NaN padding needs a float tensor, got i32"],
        ),
        (
            build_error(|k, x, _| {
                let p = k.make_block_ptr(x, [4, 4], [4, 1], [0, 0], &[4, 4], &[1, 0]);
                k.store_block(&p, k.zeros(&[8], F32), &[]);
            }),
            &["store_block", "does not fit the block [4, 4]"],
        ),
        (
            build_error(|k, x, _| {
                let p = k.make_block_ptr(x, [4, 4], [4, 1], [0, 0], &[4, 4], &[1, 0]);
                let _ = k.load_block(&p.advance([1]), &[], Padding::Zero);
            }),
            &["advance", "one offset a dimension: got 1 for a block of rank 2"],
        ),
        (
            build_error(|k, x, _| {
                let d = k.make_tensor_descriptor(x, [4, 4], [4, 1], &[4, 4]);
                let _ = d.load([0, 1, 2]);
            }),
            &["descriptor load", "got 3 for a block of rank 2"],
        ),
    ];
    for (message, parts) in cases {
        for part in parts {
            assert!(message.contains(part), "{message:?} does not say {part:?}");
        }
    }
}
