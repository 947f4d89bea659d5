//! Differential fuzzing: random well-typed kernels (`rutile_ir::testing::random_kernel`:
//! masked loads and stores on ragged sizes, element-wise chains, broadcasts, reductions,
//! loops with carried values, branches, `where`, 2-D tiles with row and column reductions
//! broadcast back, f16 stores) run on the interpreter and on every GPU
//! present with random inputs; the results must agree (integers exactly, floats within a
//! small relative tolerance: GPUs approximate `exp` and Vulkan's division).
//!
//! `RUTILE_DIFF_KERNELS=N` runs more kernels (default 150). A mismatch prints the seed and
//! the kernel, which reproduces it.

use rutile::ir::testing::{random_kernel, random_kernel_steps, Rng};
use rutile::{Arg, CpuDevice, Device, DeviceExt, LaunchConfig};

const LEN: usize = 1024;

/// The inputs of one run: `a`, `b`, `c` (f16, poison for elements no store reaches), `n`, `x`.
type Inputs<'a> = (&'a [f32], &'a [i32], &'a [half::f16], i32, f32);

fn run(
    d: &dyn Device,
    kernel: &rutile::Kernel,
    (a, b, c, n, x): Inputs<'_>,
) -> rutile::Result<(Vec<f32>, Vec<i32>, Vec<half::f16>)> {
    let (ab, bb, cb) = (d.upload(a)?, d.upload(b)?, d.upload(c)?);
    let args = [(&ab).into(), (&bb).into(), (&cb).into(), Arg::I32(n), Arg::F32(x)];
    // Blocks are at least 16 elements: LEN / 16 programs cover LEN.
    d.launch(kernel, &LaunchConfig::grid1((LEN / 16) as u32), &args)?;
    Ok((d.download(&ab)?, d.download(&bb)?, d.download(&cb)?))
}

/// Floats agree: equal (infinities included), both NaN, or within `rel` of the larger of
/// `|want|` and 1.
fn close(got: f32, want: f32, rel: f32) -> bool {
    got == want || (got.is_nan() && want.is_nan()) || (got - want).abs() <= rel * want.abs().max(1.0)
}

/// The first difference between the interpreter and `d` on these inputs, if any.
fn mismatch(cpu: &CpuDevice, d: &dyn Device, kernel: &rutile::Kernel, inputs: Inputs<'_>) -> Option<String> {
    let (wa, wb, wc) = run(cpu, kernel, inputs).unwrap_or_else(|e| panic!("interpreter: {e}\n{kernel}"));
    let (ga, gb, gc) = match run(d, kernel, inputs) {
        Ok(r) => r,
        Err(e) => return Some(format!("error: {e}")),
    };
    for i in 0..LEN {
        if gb[i] != wb[i] {
            return Some(format!("b[{i}] = {}, interpreter {}", gb[i], wb[i]));
        }
        if !close(ga[i], wa[i], 1e-4) {
            return Some(format!("a[{i}] = {}, interpreter {}", ga[i], wa[i]));
        }
        // f16 results may round to a neighbouring f16 when the f32 values differ slightly.
        if !close(gc[i].to_f32(), wc[i].to_f32(), 2e-3) {
            return Some(format!("c[{i}] = {}, interpreter {}", gc[i], wc[i]));
        }
    }
    None
}

#[test]
fn random_kernels_agree_with_the_interpreter() {
    let (_turn, devices) = rutile_examples::gpus::gpus_under_test();
    let kernels: u64 = std::env::var("RUTILE_DIFF_KERNELS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(150);
    let cpu = CpuDevice::new();
    let mut tried = vec![0u32; devices.len()];
    for seed in 0..kernels {
        let Ok(kernel) = random_kernel(seed) else { continue };
        let mut rng = Rng::new(seed ^ 0xd1ff);
        let a = rng.f32s(LEN, -2.0, 2.0);
        let b = rng.i32s(LEN, 0, 1000);
        let n = 1 + rng.below(LEN as u64) as i32;
        let x = rng.uniform(-1.0, 1.0) as f32;
        let c = rng.f16s(LEN, -1.0, 1.0);
        for (di, d) in devices.iter().enumerate() {
            tried[di] += 1;
            let inputs = (a.as_slice(), b.as_slice(), c.as_slice(), n, x);
            if let Some(m) = mismatch(&cpu, d.as_ref(), &kernel, inputs) {
                // Shrink: the fewest random steps of the same seed that still disagree.
                let (steps, small, m) = (0..64)
                    .filter_map(|s| random_kernel_steps(seed, s).ok().map(|k| (s, k)))
                    .find_map(|(s, k)| mismatch(&cpu, d.as_ref(), &k, inputs).map(|m| (s, k, m)))
                    .unwrap_or((usize::MAX, kernel.clone(), m));
                panic!(
                    "{} disagrees with the interpreter: {m}\nreproduce with random_kernel_steps({seed}, {steps}) (n = {n}, x = {x}):\n{small}",
                    d.id()
                );
            }
        }
    }
    for (d, t) in devices.iter().zip(&tried) {
        println!("{}: {t} random kernels agree with the interpreter", d.id());
    }
}
