//! Checks a per-thread kernel: register types agree with every statement, memory and
//! parameters exist and have the right kinds. A failure is a bug in the lowering; the
//! message says which statement.

use super::{Expr, Memory, Reg, Special, Stmt, ThreadKernel, ThreadParam};
use crate::ir::{Literal, RoundedOp, UnaryOp};
use crate::types::ScalarType;

/// Checks `kernel`; the error names the first malformed statement.
pub fn verify(kernel: &ThreadKernel) -> Result<(), String> {
    // Shuffles and lane arithmetic take lanes modulo the warp size as a bit mask.
    if !kernel.warp_size.is_power_of_two() || kernel.num_warps == 0 {
        return Err(format!(
            "the warp size ({}) must be a power of two and the number of warps ({}) positive",
            kernel.warp_size, kernel.num_warps
        ));
    }
    if kernel.threads() > super::MAX_THREADS {
        let producers = match kernel.producer_warps {
            0 => String::new(),
            p => format!(" and {p} producer warps"),
        };
        return Err(format!(
            "{} warps{producers} of {} threads make {} threads per program; at most {} are allowed",
            kernel.num_warps,
            kernel.warp_size,
            (kernel.num_warps as u64 + kernel.producer_warps as u64) * kernel.warp_size as u64,
            super::MAX_THREADS
        ));
    }
    for (i, a) in kernel.shared.iter().enumerate() {
        if a.elem == ScalarType::Bool || a.len == 0 {
            return Err(format!("shared buffer {i} must hold numbers and be non-empty"));
        }
    }
    // Exact, in u64: the backends lay the buffers out with u32 offsets.
    let shared: u64 = kernel
        .shared
        .iter()
        .map(|a| (a.len as u64 * a.elem.size_bytes() as u64).div_ceil(16) * 16)
        .sum();
    if shared > u32::MAX as u64 {
        return Err(format!("{shared} bytes of shared memory do not fit a u32"));
    }
    for (i, m) in kernel.tensor_maps.iter().enumerate() {
        tensor_map(kernel, m).map_err(|e| format!("tensor map {i}: {e}"))?;
    }
    if let Some(p) = kernel.persistent {
        persistent(kernel, p).map_err(|e| format!("persistent grid: {e}"))?;
    }
    if let Some(b) = kernel.block_programs {
        block_programs(kernel, b).map_err(|e| format!("programs per block: {e}"))?;
    }
    split_cluster_barriers(kernel)?;
    check(kernel, &kernel.body)
}

/// The halves of split cluster barriers (`ClusterArrive`, `ClusterWait`) are statements of
/// the kernel's top level, where every thread runs each once: each arrive is followed by
/// its wait, with no other cluster barrier and no store into another program between them
/// (the barrier would not order it), and no arrive is left without its wait. Elsewhere the
/// halves could pair up differently in different programs, which on a GPU hangs.
fn split_cluster_barriers(k: &ThreadKernel) -> Result<(), String> {
    let mut nested = false;
    for s in &k.body {
        // (The walk visits `s` itself first.)
        super::walk_stmts(std::slice::from_ref(s), &mut |n| {
            nested |= !std::ptr::eq(n, s) && matches!(n, Stmt::ClusterArrive | Stmt::ClusterWait);
        });
    }
    if nested {
        return Err("a split cluster barrier's arrive or wait is nested in control flow; they belong to the kernel's top-level statements".into());
    }
    let mut arrived = false;
    for s in &k.body {
        match s {
            Stmt::ClusterArrive if arrived => {
                return Err("a second cluster arrive before the wait of the first".into());
            }
            Stmt::ClusterArrive => arrived = true,
            Stmt::ClusterWait if !arrived => return Err("a cluster wait without a cluster arrive before it".into()),
            Stmt::ClusterWait => arrived = false,
            _ if arrived => {
                let mut bad = None;
                super::walk_stmts(std::slice::from_ref(s), &mut |n| match n {
                    Stmt::ClusterBarrier => {
                        bad.get_or_insert("a cluster barrier");
                    }
                    Stmt::ClusterStore { .. } => {
                        bad.get_or_insert("a store into another program");
                    }
                    _ => {}
                });
                if let Some(what) = bad {
                    return Err(format!(
                        "{what} between a cluster arrive and its wait, which do not order it: `{}`",
                        one_line(k, s)
                    ));
                }
            }
            _ => {}
        }
    }
    if arrived {
        return Err("a cluster arrive without its wait before the kernel ends".into());
    }
    Ok(())
}

/// Several programs a block: whole warps each, a shared producer, the grid's x in an i32
/// scalar parameter (before a persistent walk's grid, which is then the grid of blocks).
fn block_programs(k: &ThreadKernel, b: super::BlockPrograms) -> Result<(), String> {
    if b.programs < 2 || k.num_warps % b.programs != 0 {
        return Err(format!(
            "{} programs do not split {} consumer warps evenly",
            b.programs, k.num_warps
        ));
    }
    if k.producer_warps == 0 {
        return Err("only a warp-specialized kernel runs several programs a block".into());
    }
    if k.persistent.is_some_and(|p| p.grid_params[0] <= b.grid_x_param) {
        return Err(
            "a persistent kernel of several programs a block takes the program grid's x before the grid of blocks"
                .into(),
        );
    }
    match k.params.get(b.grid_x_param as usize) {
        Some(ThreadParam::Scalar {
            ty: ScalarType::I32, ..
        }) => Ok(()),
        _ => Err(format!("parameter {} is not an i32 scalar", b.grid_x_param)),
    }
}

/// A persistent kernel's grid comes in i32 scalar parameters and its tiles in a loop.
fn persistent(k: &ThreadKernel, p: super::PersistentGrid) -> Result<(), String> {
    for i in p.grid_params {
        match k.params.get(i as usize) {
            Some(ThreadParam::Scalar {
                ty: ScalarType::I32, ..
            }) => {}
            _ => return Err(format!("parameter {i} is not an i32 scalar")),
        }
    }
    let ends_in_loop = |stmts: &[Stmt]| matches!(stmts.last(), Some(Stmt::While { .. }));
    match k.body.last() {
        Some(Stmt::While { .. }) => Ok(()),
        Some(Stmt::Specialized { producer, consumer }) if ends_in_loop(producer) && ends_in_loop(consumer) => {
            // The producer runs ahead into the next tile's copies while the consumers finish
            // this one: they must not write what it fills.
            let filled = written_buffers(producer);
            match written_buffers(consumer).intersection(&filled).next() {
                Some(a) => Err(format!(
                    "the consumers write shared buffer {a}, which the producer fills for the next tile while they finish this one"
                )),
                None => Ok(()),
            }
        }
        _ => Err("the body's last statement is not a loop over tiles".into()),
    }
}

/// The shared buffers that `stmts` write (stores, copies, cooperative-matrix stores).
fn written_buffers(stmts: &[Stmt]) -> std::collections::BTreeSet<u32> {
    let mut out = std::collections::BTreeSet::new();
    super::walk_stmts(stmts, &mut |s| match s {
        Stmt::TmaLoad { alloc, .. }
        | Stmt::AsyncCopy { alloc, .. }
        | Stmt::CoopStore { alloc, .. }
        | Stmt::Store {
            mem: Memory::Shared { alloc },
            ..
        } => {
            out.insert(*alloc);
        }
        _ => {}
    });
    out
}

/// A tensor map describes a pointer parameter through integer parameters or constants, in
/// boxes the hardware takes: at most 256 elements a side, rows of 16 bytes up to the swizzle.
fn tensor_map(k: &ThreadKernel, m: &super::TensorMap) -> Result<(), String> {
    let elem = memory_elem(k, Memory::Global { param: m.param })?;
    for v in m
        .dims
        .iter()
        .flatten()
        .chain([&m.stride])
        .chain(m.outer.iter().flatten())
    {
        match *v {
            super::LaunchValue::Const(c) if c <= 0 => return Err(format!("an extent or stride of {c}")),
            super::LaunchValue::Param(p) => match k.params.get(p as usize) {
                Some(ThreadParam::Scalar { ty, .. }) if ty.is_int() => {}
                _ => return Err(format!("parameter {p} is not an integer scalar")),
            },
            _ => {}
        }
    }
    let row = m.box_dims[0] as usize * elem.size_bytes();
    if !matches!(m.swizzle, 32 | 64 | 128) || row % 16 != 0 || row > m.swizzle as usize {
        return Err(format!(
            "box rows of {row} bytes in a {}-byte swizzle (rows of 16-byte multiples up to the swizzle)",
            m.swizzle
        ));
    }
    if m.box_dims.iter().any(|&d| d == 0 || d > 256) {
        return Err(format!("a box of {:?} elements (1 to 256 a side)", m.box_dims));
    }
    Ok(())
}

/// An mbarrier is an element of a shared buffer of u64s, indexed by an i32.
fn mbarrier(k: &ThreadKernel, bar: &super::MBarrier) -> Result<(), String> {
    let elem = memory_elem(k, Memory::Shared { alloc: bar.alloc })?;
    if elem != ScalarType::U64 {
        return Err(format!(
            "an mbarrier lives in a buffer of u64, shared{} holds {elem}",
            bar.alloc
        ));
    }
    want(k, bar.index, ScalarType::I32, "mbarrier index")
}

/// A TMA copy or store (`what`) between tensor map `map` and shared buffer `alloc` at
/// element `at`: the same elements, the buffer where the swizzle's pattern starts, i32
/// coordinates.
fn tma_box(k: &ThreadKernel, map: u32, alloc: u32, at: Reg, coords: &[Reg], what: &str) -> Result<(), String> {
    let m = k
        .tensor_maps
        .get(map as usize)
        .ok_or_else(|| format!("tensor map {map} does not exist"))?;
    if coords.len() != m.rank() {
        return Err(format!(
            "{} coordinates for tensor map {map} of {} dimensions",
            coords.len(),
            m.rank()
        ));
    }
    let global = memory_elem(k, Memory::Global { param: m.param })?;
    let shared = memory_elem(k, Memory::Shared { alloc })?;
    if global != shared {
        return Err(format!("a {what} between {global} elements and shared {shared}"));
    }
    if k.shared[alloc as usize].align < 1024 {
        return Err(format!(
            "a {what}'s buffer shared{alloc} must start on a 1024-byte boundary"
        ));
    }
    want(k, at, ScalarType::I32, "TMA shared element")?;
    for &c in coords {
        want(k, c, ScalarType::I32, "TMA coordinate")?;
    }
    Ok(())
}

fn check(k: &ThreadKernel, stmts: &[Stmt]) -> Result<(), String> {
    for s in stmts {
        stmt(k, s).map_err(|e| format!("{e} in `{}`", one_line(k, s)))?;
        match s {
            Stmt::If {
                then_body, else_body, ..
            } => {
                check(k, then_body)?;
                check(k, else_body)?;
            }
            Stmt::While { cond_body, body, .. } => {
                check(k, cond_body)?;
                check(k, body)?;
            }
            Stmt::Specialized { producer, consumer } => {
                specialized(k, producer, consumer)?;
                check(k, producer)?;
                check(k, consumer)?;
            }
            _ => {}
        }
    }
    Ok(())
}

/// The sides of a warp-specialized statement: a producer warpgroup exists, and neither side
/// waits at a barrier of the whole program (the other side never comes) or specializes again.
fn specialized(k: &ThreadKernel, producer: &[Stmt], consumer: &[Stmt]) -> Result<(), String> {
    if k.producer_warps * k.warp_size != 128 {
        return Err(format!(
            "warp specialization needs a producer warpgroup (128 threads), the kernel has {} producer warps of {}",
            k.producer_warps, k.warp_size
        ));
    }
    let mut bad = None;
    super::walk_stmts(producer, &mut |s| {
        if matches!(s, Stmt::NamedBarrier { .. }) {
            bad.get_or_insert("the producer side waits at a named barrier");
        }
    });
    for side in [producer, consumer] {
        super::walk_stmts(side, &mut |s| match s {
            Stmt::Barrier => {
                bad.get_or_insert("a side of warp specialization waits at a barrier of every thread");
            }
            Stmt::Specialized { .. } => {
                bad.get_or_insert("warp specialization is nested");
            }
            _ => {}
        });
    }
    bad.map_or(Ok(()), |b| Err(b.to_string()))
}

fn one_line(k: &ThreadKernel, s: &Stmt) -> String {
    k.stmt_text(s)
}

fn ty(k: &ThreadKernel, r: Reg) -> Result<ScalarType, String> {
    k.regs
        .try_get(r)
        .map(|d| d.ty)
        .ok_or_else(|| format!("register r{} does not exist", r.index()))
}

fn want(k: &ThreadKernel, r: Reg, t: ScalarType, what: &str) -> Result<(), String> {
    let got = ty(k, r)?;
    if got != t {
        return Err(format!("{what} r{} is {got}, expected {t}", r.index()));
    }
    Ok(())
}

fn coop(k: &ThreadKernel, c: super::CoopReg) -> Result<super::CoopMatrix, String> {
    k.coop
        .get(c as usize)
        .copied()
        .ok_or_else(|| format!("cooperative matrix c{c} does not exist"))
}

fn int_index(k: &ThreadKernel, r: Reg) -> Result<(), String> {
    match ty(k, r)? {
        ScalarType::I32 | ScalarType::I64 | ScalarType::U32 | ScalarType::U64 => Ok(()),
        t => Err(format!("index r{} is {t}, expected a 32- or 64-bit integer", r.index())),
    }
}

fn pred(k: &ThreadKernel, p: &Option<Reg>) -> Result<(), String> {
    p.map_or(Ok(()), |p| want(k, p, ScalarType::Bool, "predicate"))
}

fn memory_elem(k: &ThreadKernel, m: Memory) -> Result<ScalarType, String> {
    match m {
        Memory::Global { param } => match k.params.get(param as usize) {
            Some(ThreadParam::Ptr { elem, .. }) => Ok(*elem),
            _ => Err(format!("parameter {param} is not a pointer")),
        },
        Memory::Shared { alloc } => k
            .shared
            .get(alloc as usize)
            .map(|a| a.elem)
            .ok_or_else(|| format!("shared buffer {alloc} does not exist")),
    }
}

fn stmt(k: &ThreadKernel, s: &Stmt) -> Result<(), String> {
    match s {
        Stmt::Set { dst, expr } => set(k, *dst, expr),
        Stmt::Load {
            dsts,
            mem,
            index,
            pred: p,
            ..
        }
        | Stmt::Store {
            values: dsts,
            mem,
            index,
            pred: p,
        } => {
            if !dsts.len().is_power_of_two() || dsts.len() > super::MAX_VECTOR {
                return Err(format!("vector of {} elements", dsts.len()));
            }
            let elem = memory_elem(k, *mem)?;
            for &d in dsts {
                want(k, d, elem, "element")?;
            }
            int_index(k, *index)?;
            pred(k, p)
        }
        Stmt::Atomic {
            dst,
            param,
            index,
            value,
            pred: p,
            ..
        } => {
            let elem = memory_elem(k, Memory::Global { param: *param })?;
            want(k, *dst, elem, "old value")?;
            want(k, *value, elem, "value")?;
            int_index(k, *index)?;
            pred(k, p)
        }
        Stmt::AtomicCas {
            dst,
            param,
            index,
            cmp,
            value,
            pred: p,
            ..
        } => {
            let elem = memory_elem(k, Memory::Global { param: *param })?;
            for (r, what) in [(*dst, "old value"), (*cmp, "compared value"), (*value, "value")] {
                want(k, r, elem, what)?;
            }
            int_index(k, *index)?;
            pred(k, p)
        }
        Stmt::If { cond, .. } | Stmt::While { cond, .. } => want(k, *cond, ScalarType::Bool, "condition"),
        Stmt::Mma { d, a, b, c } => {
            if k.warp_size != 32 {
                return Err(format!(
                    "`mma` needs warps of 32 threads, the kernel has {}",
                    k.warp_size
                ));
            }
            let input = ty(k, a[0])?;
            if !matches!(input, ScalarType::F16 | ScalarType::BF16) {
                return Err(format!("`mma` multiplies f16 or bf16 fragments, got {input}"));
            }
            for &r in a.iter().chain(b) {
                want(k, r, input, "mma operand")?;
            }
            for &r in c.iter().chain(d) {
                want(k, r, ScalarType::F32, "mma accumulator")?;
            }
            Ok(())
        }
        Stmt::MmaTf32 { d, a, b, c } => {
            if k.warp_size != 32 {
                return Err(format!(
                    "`mma` needs warps of 32 threads, the kernel has {}",
                    k.warp_size
                ));
            }
            for &r in a.iter().chain(b) {
                want(k, r, ScalarType::F32, "tf32 mma operand")?;
            }
            for &r in c.iter().chain(d) {
                want(k, r, ScalarType::F32, "mma accumulator")?;
            }
            Ok(())
        }
        Stmt::CoopLoad {
            dst: c,
            alloc,
            index,
            stride,
            row_major,
        }
        | Stmt::CoopStore {
            src: c,
            alloc,
            index,
            stride,
            row_major,
        } => {
            let m = coop(k, *c)?;
            let elem = memory_elem(k, Memory::Shared { alloc: *alloc })?;
            if elem != m.elem {
                return Err(format!(
                    "cooperative matrix c{c} of {} in shared{alloc} of {elem}",
                    m.elem
                ));
            }
            let line = if *row_major { m.cols } else { m.rows };
            // (A load at stride 0 repeats one line: a broadcast. A store so would race.)
            let broadcast = *stride == 0 && matches!(s, Stmt::CoopLoad { .. });
            if (*stride < line && !broadcast) || (*stride as usize * elem.size_bytes()) % 16 != 0 {
                return Err(format!(
                    "stride {stride} of c{c}: at least a row ({line}) and a multiple of 16 bytes (or 0 for a \
                     load's broadcast)"
                ));
            }
            int_index(k, *index)
        }
        Stmt::CoopMulAdd { d, a, b, c } => {
            let [md, ma, mb, mc] = [coop(k, *d)?, coop(k, *a)?, coop(k, *b)?, coop(k, *c)?];
            use super::CoopRole::{Acc, A, B};
            if (ma.role, mb.role, mc.role, md.role) != (A, B, Acc, Acc) {
                return Err("coop_muladd takes matrices of roles A, B, accumulator".into());
            }
            if ma.rows != mc.rows || mb.cols != mc.cols || ma.cols != mb.rows || md != mc || ma.elem != mb.elem {
                return Err(format!(
                    "coop_muladd of {}x{} {} by {}x{} {} into {}x{} {}",
                    ma.rows, ma.cols, ma.elem, mb.rows, mb.cols, mb.elem, mc.rows, mc.cols, mc.elem
                ));
            }
            Ok(())
        }
        Stmt::CoopMul { d, a, b } => {
            let [md, ma, mb] = [coop(k, *d)?, coop(k, *a)?, coop(k, *b)?];
            if ma.role != super::CoopRole::Acc || md != ma || mb != ma {
                return Err(format!(
                    "coop_mul of {}x{} {} by {}x{} {} into {}x{} {}: accumulators of one shape and type",
                    ma.rows, ma.cols, ma.elem, mb.rows, mb.cols, mb.elem, md.rows, md.cols, md.elem
                ));
            }
            Ok(())
        }
        Stmt::CoopZero { dst } => coop(k, *dst).map(|_| ()),
        Stmt::LdMatrix {
            dsts,
            alloc,
            index,
            trans,
        } => {
            if k.warp_size != 32 {
                return Err(format!(
                    "`ldmatrix` needs warps of 32 threads, the kernel has {}",
                    k.warp_size
                ));
            }
            let elem = memory_elem(k, Memory::Shared { alloc: *alloc })?;
            let per_matrix = match elem.size_bytes() {
                _ if elem == ScalarType::Bool => 0,
                2 => 2,
                4 if !trans => 1,
                4 => {
                    return Err(format!(
                        "`ldmatrix.trans` transposes 16-bit elements, shared{alloc} holds {elem}"
                    ))
                }
                _ => 0,
            };
            if per_matrix == 0 {
                return Err(format!(
                    "`ldmatrix` loads 16- or 32-bit elements, shared{alloc} holds {elem}"
                ));
            }
            if !matches!(dsts.len() / per_matrix, 1 | 2 | 4) || dsts.len() % per_matrix != 0 {
                return Err(format!(
                    "`ldmatrix` loads 1, 2 or 4 matrices ({per_matrix} register(s) each for {elem}), got {} registers",
                    dsts.len()
                ));
            }
            for &r in dsts {
                want(k, r, elem, "ldmatrix destination")?;
            }
            int_index(k, *index)
        }
        Stmt::AsyncCopy {
            alloc,
            dst,
            param,
            src,
            len,
            pred: p,
        } => {
            let to = memory_elem(k, Memory::Shared { alloc: *alloc })?;
            let from = memory_elem(k, Memory::Global { param: *param })?;
            if to != from {
                return Err(format!("an async copy from {from} elements to shared {to}"));
            }
            let bytes = *len as usize * to.size_bytes();
            if !matches!(bytes, 4 | 8 | 16) {
                return Err(format!("an async copy moves 4, 8 or 16 bytes, this one {bytes}"));
            }
            int_index(k, *dst)?;
            int_index(k, *src)?;
            pred(k, p)
        }
        Stmt::MbarrierInit { bar, pred: p, .. }
        | Stmt::MbarrierArriveExpectTx { bar, pred: p, .. }
        | Stmt::MbarrierArrive { bar, pred: p }
        | Stmt::MbarrierInval { bar, pred: p } => {
            mbarrier(k, bar)?;
            pred(k, p)
        }
        Stmt::ClusterStore {
            alloc,
            index,
            rank,
            value,
            pred: p,
        } => {
            if k.cluster < 2 {
                return Err(format!(
                    "a store to another program's shared memory needs a cluster, the kernel's is {}",
                    k.cluster
                ));
            }
            let elem = memory_elem(k, Memory::Shared { alloc: *alloc })?;
            want(k, *value, elem, "value")?;
            want(k, *rank, ScalarType::I32, "cluster rank")?;
            int_index(k, *index)?;
            pred(k, p)
        }
        Stmt::ClusterBarrier | Stmt::ClusterArrive | Stmt::ClusterWait => {
            if k.cluster < 2 {
                return Err(format!(
                    "a cluster barrier needs a cluster, the kernel's is {}",
                    k.cluster
                ));
            }
            Ok(())
        }
        Stmt::NamedBarrier { id, threads } => {
            if !(1..=15).contains(id) || *threads == 0 || threads % k.warp_size != 0 || *threads > k.threads() {
                return Err(format!(
                    "a named barrier is numbered 1 to 15 and counts whole warps of the program's {} threads; this one is {id} of {threads}",
                    k.threads()
                ));
            }
            Ok(())
        }
        Stmt::Turn {
            id, threads, pred: p, ..
        } => {
            if *threads == 0 || threads % k.warp_size != 0 || *threads > k.threads() {
                return Err(format!(
                    "a turn's barrier counts whole warps of the program's {} threads, not {threads}",
                    k.threads()
                ));
            }
            want(k, *id, ScalarType::I32, "turn barrier number")?;
            pred(k, p)
        }
        Stmt::SetMaxRegisters { count, .. } => {
            if count % 8 != 0 || !(24..=256).contains(count) {
                return Err(format!("setmaxnreg takes a multiple of 8 from 24 to 256, not {count}"));
            }
            Ok(())
        }
        Stmt::MbarrierWait { bar, parity } => {
            mbarrier(k, bar)?;
            want(k, *parity, ScalarType::I32, "mbarrier parity")
        }
        Stmt::TmaLoad {
            map,
            alloc,
            dst,
            coords,
            bar,
            pred: p,
        } => {
            tma_box(k, *map, *alloc, *dst, coords, "TMA copy")?;
            mbarrier(k, bar)?;
            pred(k, p)
        }
        Stmt::Wgmma { acc, a, b, n, .. } => {
            if k.warp_size != 32 || k.threads() % 128 != 0 {
                return Err(format!(
                    "`wgmma` runs on warpgroups of 4 warps of 32 threads, the kernel has {} threads in warps of {}",
                    k.threads(),
                    k.warp_size
                ));
            }
            if *n == 0 || n % 8 != 0 || *n > 256 {
                return Err(format!("`wgmma` has N a multiple of 8 up to 256, got {n}"));
            }
            if acc.len() != *n as usize / 2 {
                return Err(format!(
                    "`wgmma.m64n{n}k16` accumulates into {} f32 registers a thread, got {}",
                    n / 2,
                    acc.len()
                ));
            }
            for &r in acc {
                want(k, r, ScalarType::F32, "wgmma accumulator")?;
            }
            let eb = memory_elem(k, Memory::Shared { alloc: b.alloc })?;
            let (ea, shared_a) = match a {
                super::WgmmaA::Shared(m) => (memory_elem(k, Memory::Shared { alloc: m.alloc })?, Some(m)),
                super::WgmmaA::Registers(r) => {
                    for &x in r {
                        want(k, x, eb, "wgmma A register")?;
                    }
                    (eb, None)
                }
            };
            let fp8 = ea.is_ocp_fp8() && eb.is_ocp_fp8();
            if !fp8 && (ea != eb || !matches!(ea, ScalarType::F16 | ScalarType::BF16)) {
                return Err(format!(
                    "`wgmma` multiplies f16 or bf16 operands of one type, or E4M3/E5M2 ones, got {ea} and shared{} of {eb}",
                    b.alloc
                ));
            }
            for m in shared_a.into_iter().chain([b]) {
                if !matches!(m.swizzle, 32 | 64 | 128) {
                    return Err(format!(
                        "a `wgmma` operand swizzles 32, 64 or 128 bytes, got {}",
                        m.swizzle
                    ));
                }
                let align = k.shared[m.alloc as usize].align;
                if align < 1024 {
                    return Err(format!(
                        "a `wgmma` operand's buffer shared{} must start on a 1024-byte boundary, it has {align}",
                        m.alloc
                    ));
                }
                int_index(k, m.index)?;
                if (u64::from(m.offset) * ea.size_bytes() as u64) % 16 != 0 {
                    return Err(format!(
                        "a `wgmma` operand's constant offset is a multiple of 16 bytes, got {} elements of {ea}",
                        m.offset
                    ));
                }
            }
            Ok(())
        }
        Stmt::Print {
            coords,
            values,
            pred: p,
            program,
            ..
        } => {
            for &r in coords.iter().chain(program.iter().flatten()) {
                want(k, r, ScalarType::I32, "printed coordinate")?;
            }
            for &r in values {
                ty(k, r)?;
            }
            pred(k, p)
        }
        Stmt::TmaStore {
            map,
            alloc,
            src,
            coords,
            pred: p,
        } => {
            tma_box(k, *map, *alloc, *src, coords, "TMA store")?;
            pred(k, p)
        }
        Stmt::BulkCommit { pred: p } => pred(k, p),
        Stmt::BulkWaitRead { alloc, pred: p } => {
            memory_elem(k, Memory::Shared { alloc: *alloc })?;
            pred(k, p)
        }
        Stmt::AsyncCommit
        | Stmt::AsyncWait { .. }
        | Stmt::FenceProxyAsync
        | Stmt::WgmmaFence
        | Stmt::WgmmaCommit
        | Stmt::WgmmaWait { .. }
        | Stmt::Barrier
        | Stmt::Specialized { .. }
        | Stmt::Comment(_) => Ok(()),
    }
}

fn set(k: &ThreadKernel, dst: Reg, e: &Expr) -> Result<(), String> {
    let d = ty(k, dst)?;
    match e {
        Expr::Const(l) => match (l, d) {
            (Literal::Bool(_), ScalarType::Bool) => Ok(()),
            (Literal::Int(_), t) if t.is_int() => Ok(()),
            (Literal::Float(_), t) if t.is_float() => Ok(()),
            _ => Err(format!("constant {l} cannot be {d}")),
        },
        Expr::Param(i) => match k.params.get(*i as usize) {
            Some(ThreadParam::Scalar { ty, .. }) if *ty == d => Ok(()),
            _ => Err(format!("parameter {i} is not a scalar of type {d}")),
        },
        Expr::Special(s) => {
            if let Special::ProgramId(a) | Special::NumPrograms(a) = s {
                if *a > 2 {
                    return Err(format!("grid axis {a} is not 0, 1 or 2"));
                }
            }
            (d == ScalarType::I32)
                .then_some(())
                .ok_or_else(|| "special registers are i32".into())
        }
        Expr::Copy(a) => want(k, *a, d, "source"),
        Expr::Unary(op, a) => {
            want(k, *a, d, "operand")?;
            if op.float_only() && !d.is_float() || *op == UnaryOp::Not && d.is_float() || op.bits_only() && !d.is_int()
            {
                return Err(format!("{} of {d}", op.name()));
            }
            Ok(())
        }
        Expr::Binary(_, a, b) => {
            want(k, *a, d, "operand")?;
            want(k, *b, d, "operand")
        }
        Expr::Compare(_, a, b) => {
            want(k, dst, ScalarType::Bool, "comparison result")?;
            want(k, *b, ty(k, *a)?, "operand")
        }
        Expr::Select(c, a, b) => {
            want(k, *c, ScalarType::Bool, "condition")?;
            want(k, *a, d, "operand")?;
            want(k, *b, d, "operand")
        }
        Expr::Fma(a, b, c) => {
            for r in [a, b, c] {
                want(k, *r, d, "operand")?;
            }
            d.is_float().then_some(()).ok_or_else(|| format!("fma of {d}"))
        }
        Expr::BytePerm(a, b, s) => {
            for r in [a, b, s] {
                want(k, *r, d, "operand")?;
            }
            matches!(d, ScalarType::I32 | ScalarType::U32)
                .then_some(())
                .ok_or_else(|| format!("byte_perm of {d}"))
        }
        Expr::Rounded(op, rounding, args) => {
            if args.len() != op.arity() {
                return Err(format!("{} of {} operands", op.name(*rounding), args.len()));
            }
            if *op == RoundedOp::Convert {
                let s = ty(k, args[0])?;
                return RoundedOp::converts(s, d)
                    .then_some(())
                    .ok_or_else(|| format!("{} from {s} to {d}", op.name(*rounding)));
            }
            for r in args {
                want(k, *r, d, "operand")?;
            }
            matches!(d, ScalarType::F32 | ScalarType::F64)
                .then_some(())
                .ok_or_else(|| format!("{} of {d}", op.name(*rounding)))
        }
        Expr::Cast(a) => ty(k, *a).map(|_| ()),
        Expr::Bitcast(a) => {
            let s = ty(k, *a)?;
            (s.bits() == d.bits())
                .then_some(())
                .ok_or_else(|| format!("bitcast from {s} to {d}"))
        }
        Expr::ShuffleXor { value, mask } => {
            want(k, *value, d, "shuffled value")?;
            (*mask < k.warp_size)
                .then_some(())
                .ok_or_else(|| format!("shuffle mask {mask} exceeds the warp"))
        }
        Expr::ShuffleIdx { value, lane } => {
            want(k, *value, d, "shuffled value")?;
            want(k, *lane, ScalarType::I32, "lane")
        }
    }
}
