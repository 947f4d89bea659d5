//! The calls `docs/triton-to-rutile.md` names, each made once in kernels that must build,
//! so that the guide cannot name a function the builder does not have.

use rutile_ir::ir::{AtomicOp, AtomicOrder, MemScope, MemSem};
use rutile_ir::ScalarType::{F16, F32, I32};
use rutile_ir::{CacheModifier, DotPrecision, Kernel, Padding, ReduceOp};

#[test]
fn every_call_of_the_porting_guide_builds() {
    let kernel = Kernel::build("guide", |k| {
        let (x_ptr, i_ptr, h_ptr) = (k.arg_ptr("x", F32), k.arg_ptr("i", I32), k.arg_ptr("h", F16));
        let n = k.arg_i32("n");
        let (pid, programs) = (k.program_id(0), k.num_programs(0));
        // Creation and shape.
        let offs = pid * 64 + k.arange(0, 64);
        let mask = offs.lt(n);
        let x = k.load_masked(x_ptr + offs, mask, 0.0);
        let streamed = k.load_masked_with(x_ptr + offs, mask, 0.0, CacheModifier::Streaming);
        let ints = k.load(i_ptr + offs);
        let (full, zeros, like) = (k.full(&[64], 1.5, F32), k.zeros(&[64], F32), k.zeros_like(x));
        let cast = x.to(F16).to(F32) + x.bitcast(I32).bitcast(F32);
        let pairs = k.join(x, streamed);
        let (a, b) = k.split(pairs);
        let wide = k.cat(a, b) + k.interleave(a, b);
        let tile = x
            .reshape(&[8, 8])
            .expand_dims(2)
            .broadcast_to(&[8, 8, 2])
            .permute(&[1, 0, 2]);
        let flat = tile.reshape(&[8, 16]).trans().ravel();
        // Indexing.
        let picked = k.where_(mask, x.flip(0), full);
        let (si, sj) = k.swizzle2d(offs, offs, 64, 64, 8);
        let gathered = x.gather((ints + si + sj) & 63, 0);
        // Math.
        let m = x.truediv(3.0f32)
            + x.fdiv(full, false)
            + x.div_rn(full)
            + x.abs().ceil().floor()
            + (x.cos() + x.sin() + x.erf() + x.exp() + x.exp2() + x.sigmoid() + x.tanh())
            + (x.abs() + 1.0f32).log()
            + (x.abs() + 1.0f32).log2()
            + (x.abs() + 1.0f32).sqrt()
            + (x.abs() + 1.0f32).rsqrt()
            + x.fma(full, zeros)
            + k.maximum(x, like)
            + k.minimum(x, like)
            + k.clamp(x, -1.0f32, 1.0f32)
            + x.softmax(0, true)
            + (x.abs() + 1.0f32).pow(full)
            + (x * 0.1f32).asin()
            + (x * 0.1f32).acos()
            + x.atan()
            + k.atan2(x, full)
            + (x.expm1() + x.log1p().abs() + x.exp10() + x.abs().log10() + x.sinh() + x.cosh())
            + (x.asinh() + (x.abs() + 1.0f32).acosh() + (x * 0.1f32).atanh())
            + (x.trunc() + x.rint() + x.round() + x.copysign(full))
            + (x.hypot(full) + x.cbrt())
            + (x.rhypot(full) + k.norm3d(x, full, x) + k.norm4d(x, full, x, x) + x.rcbrt())
            + (k.rnorm3d(x, full, x) + k.rnorm4d(x, full, x, x) + x.fmax(full) + x.fmin(full))
            + (x.modf().0 + x.remainder(full) + x.erfcx() + x.lgamma() + x.tgamma())
            + (x.normcdf() + x.normcdfinv() + x.erfcinv() + x.sin_precise() + x.cos_precise())
            + (x.cyl_bessel_i0() + x.cyl_bessel_i1() + x.j0() + x.j1() + x.y0() + x.y1())
            + (x.jn(3) + x.yn(n) + x.modf().1)
            + k.where_(x.isnan() | x.isinf() | !x.isfinite() | x.signbit(), 0.0f32, 1.0f32);
        let hi = k.umulhi(ints.bitcast(rutile_ir::ScalarType::U32), 3u32);
        let halves = k.hadd(ints, ints)
            + k.rhadd(ints, ints)
            + k.mulhi(ints, ints)
            + ints.byte_perm(ints, ints)
            + k.sad(ints, ints, ints)
            + ints.mul24(ints);
        let cdiv = k.cdiv(n, 64);
        // Compiler hints.
        let hinted = offs.multiple_of(64).max_contiguous(64) + (offs / 4).max_constancy(4) + pid.multiple_of(1);
        // Reductions, scans, sorts.
        let sums = x.sum(0) + x.max(0) + x.min(0) + x.reduce_with(ReduceOp::Sum, 0, true).sum(0);
        let idx = x.argmax(0) + x.argmin(0) + ints.xor_sum(0, false) + ints.histogram(64).sum(0);
        let reduced = x.reduce(0, false, |_, a, b| a + b);
        let scanned = x.cumsum(0, false) + x.cumprod(0, true) + x.associative_scan(0, false, |_, a, b| a + b);
        let sorted = x.sort(0, true) + x.topk(16, 0).sum(0);
        // Random numbers.
        let random = k.rand(7, offs) + k.randn(7, offs) + k.randint(7, offs).to(F32);
        let _four = k.randint4x(7, offs);
        // Linear algebra.
        let square = k.arange(0, 16).expand_dims(1) * 16 + k.arange(0, 16).expand_dims(0);
        let t16 = k.load(h_ptr + square) + flat.sum(0).to(F16);
        let acc = k.zeros(&[16, 16], F32);
        let d = k.dot(t16, t16) + k.dot_acc(t16, t16.trans(), acc);
        let d = d + k.dot_with(t16.to(F32), t16.to(F32), acc, DotPrecision::Tf32);
        // Control flow.
        let looped = k.for_range(0, n, 64, &[x], |i, c| vec![c[0] + i.to(F32)]);
        let staged = k.for_range_staged(0, n, 64, 2, &[x], |i, c| {
            vec![c[0] + k.load_masked(x_ptr + i + k.arange(0, 64), mask, 0.0)]
        });
        let chosen = k.if_else(n.gt(10), || vec![x], || vec![zeros]);
        k.if_then(n.gt(100), || {});
        let counted = k.while_loop(&[n], |c| c[0].gt(0), |c| vec![c[0] - 1]);
        for step in 0..2 {
            k.static_assert(step < 2, "a static range");
        }
        // Debugging.
        k.device_assert(offs.ge(0), "offsets are not negative");
        k.assume(n.gt(0));
        k.device_print("x", &[x]);
        // Block pointers and descriptors.
        let p = k.make_block_ptr(x_ptr, (n, 64), (64, 1), (pid * 8, 0), &[8, 64], &[1, 0]);
        let blk = k.load_block(&p.advance((8, 0)), &[0, 1], Padding::Zero) + k.load_block(&p, &[0], Padding::Nan);
        k.store_block(&p, blk, &[0, 1]);
        let desc = k.make_tensor_descriptor(x_ptr, (n, 64), (64, 1), &[8, 64]);
        desc.store((pid * 8, 0), desc.load((pid * 8, 0)));
        // Atomics.
        let old = k.atomic_add(x_ptr + offs, 1.0f32, Some(mask))
            + k.atomic_max(x_ptr + offs, 1.0f32, None)
            + k.atomic_min(x_ptr + offs, 1.0f32, None)
            + k.atomic_xchg(x_ptr + offs, 1.0f32, None);
        let bits = k.atomic_cas(i_ptr + offs, 0, 1, None) + k.atomic_rmw(AtomicOp::Xor, i_ptr + offs, 1, None);
        let cta = AtomicOrder::new(MemSem::Relaxed, MemScope::Cta);
        let ordered = k.atomic_rmw_ordered(AtomicOp::Add, i_ptr + offs, 1, Some(mask), cta)
            + k.atomic_cas_ordered(i_ptr + offs, 0, 1, None, AtomicOrder::relaxed());
        let out = m
            + cast
            + wide.reshape(&[2, 64]).sum(0)
            + picked
            + gathered
            + hi.to(F32)
            + halves.to(F32)
            + cdiv.to(F32)
            + hinted.to(F32)
            + sums
            + idx.to(F32)
            + reduced
            + scanned
            + sorted
            + random
            + looped[0]
            + staged[0]
            + chosen[0]
            + counted[0].to(F32)
            + old
            + bits.to(F32)
            + ordered.to(F32)
            + programs.to(F32)
            + d.sum(0).sum(0);
        k.store_masked(x_ptr + offs, out, mask);
    });
    if let Err(e) = kernel {
        panic!("{e}");
    }
}
