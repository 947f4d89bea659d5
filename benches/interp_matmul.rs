//! The CPU interpreter on the seed kernels at the tutorials' sizes: the fp16 matmul
//! (512x512x512, 64x64x32 blocks), vector add (2^20 f32) and softmax (4096x1024 f32).
//!
//! ```sh
//! cargo bench -p rutile-benches --bench interp_matmul
//! ```
//!
//! Short runs (10 samples of one launch each, two seconds of measurement per kernel):
//! the interpreter is deterministic and single-threaded, so its times vary little. The
//! issue's target: the 512³ fp16 matmul interprets in under 2 s in release mode.

use criterion::{criterion_group, criterion_main, Criterion, SamplingMode, Throughput};
use rutile_ir::interp::{self, ArgValue, HostBuffer};
use rutile_ir::seeds::{self, MatmulMeta};
use rutile_ir::testing::Rng;
use rutile_ir::ScalarType::F32;
use std::time::Duration;

fn ptr(buffer: usize) -> ArgValue {
    ArgValue::Ptr { buffer, offset: 0 }
}

fn int(v: usize) -> ArgValue {
    ArgValue::Int(v as i64)
}

fn interp_seeds(c: &mut Criterion) {
    let mut rng = Rng::new(42);
    let mut group = c.benchmark_group("interp");
    // One launch per sample: the matmul takes tens of milliseconds, so linear sampling's
    // growing iteration counts would only lengthen the run.
    group.sampling_mode(SamplingMode::Flat);
    group.sample_size(10);
    group.warm_up_time(Duration::from_millis(500));
    group.measurement_time(Duration::from_secs(2));

    let (m, n, k) = (512, 512, 512);
    let meta = MatmulMeta::fp16(64, 64, 32);
    let kernel = seeds::matmul(&meta).unwrap();
    let a = rng.f16s(m * k, -1.0, 1.0);
    let b = rng.f16s(k * n, -1.0, 1.0);
    let mut buffers = [
        HostBuffer::from_slice(&a),
        HostBuffer::from_slice(&b),
        HostBuffer::zeros(meta.output, m * n),
    ];
    let args: Vec<ArgValue> = [ptr(0), ptr(1), ptr(2)]
        .into_iter()
        .chain(seeds::matmul_row_major_args(m, n, k).map(|v| ArgValue::Int(v as i64)))
        .collect();
    let grid = [seeds::matmul_grid(&meta, m as u32, n as u32), 1, 1];
    group.bench_function("matmul_fp16_512x512x512", |bench| {
        bench.iter(|| interp::run(&kernel, grid, &args, &mut buffers).unwrap())
    });

    let len = 1 << 20;
    let block = 1024;
    let kernel = seeds::vector_add(F32, block).unwrap();
    let x = rng.f32s(len, -1.0, 1.0);
    let y = rng.f32s(len, -1.0, 1.0);
    let mut buffers = [
        HostBuffer::from_slice(&x),
        HostBuffer::from_slice(&y),
        HostBuffer::zeros(F32, len),
    ];
    let args = [ptr(0), ptr(1), ptr(2), int(len)];
    let grid = [len.div_ceil(block as usize) as u32, 1, 1];
    group.throughput(Throughput::Elements(len as u64));
    group.bench_function("vector_add_f32_1048576", |bench| {
        bench.iter(|| interp::run(&kernel, grid, &args, &mut buffers).unwrap())
    });

    let (rows, cols) = (4096, 1024);
    let kernel = seeds::softmax(seeds::softmax_block(cols as u32)).unwrap();
    let x = rng.f32s(rows * cols, -4.0, 4.0);
    let mut buffers = [HostBuffer::zeros(F32, rows * cols), HostBuffer::from_slice(&x)];
    let args = [ptr(0), ptr(1), int(cols), int(cols), int(rows), int(cols)];
    group.throughput(Throughput::Elements((rows * cols) as u64));
    group.bench_function("softmax_f32_4096x1024", |bench| {
        bench.iter(|| interp::run(&kernel, [rows as u32, 1, 1], &args, &mut buffers).unwrap())
    });
    group.finish();
}

criterion_group!(benches, interp_seeds);
criterion_main!(benches);
