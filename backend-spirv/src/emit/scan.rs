//! The first pass over a per-thread kernel: feature checks, atomically used parameters,
//! registers that can be plain expressions, and the launch values in use.

use super::*;

/// What a first pass over the kernel finds: feature checks, atomically used parameters,
/// registers that can be plain expressions, and the launch values in use.
pub(super) struct Scan {
    pub(super) atomic: Vec<bool>,
    /// Per parameter: a load or store moves whole 16-byte vectors of it.
    pub(super) vec4: Vec<bool>,
    /// Per parameter: every load and store of it moves whole 16-byte vectors of 2-byte
    /// elements (so that it can be held as `vec4<u32>`s: no access takes part of one).
    pub(super) whole_16: Vec<bool>,
    /// Per parameter of a type narrower than a word: some store writes part of a word
    /// (`sub_word.rs`).
    pub(super) partial_words: Vec<bool>,
    /// Per parameter: the fewest elements a load or store of it moves (a power of two).
    pub(super) fewest: Vec<usize>,
    /// Stores of part of a word gather their word's other parts from the neighbouring lanes
    /// first (`sub_word.rs`): the kernel has such stores and the device can shuffle within
    /// warps.
    pub(super) combine_words: bool,
    pub(super) value_reg: Vec<bool>,
    pub(super) shuffles: bool,
    pub(super) thread_id: bool,
    pub(super) program_id: [bool; 3],
    pub(super) num_programs: [bool; 3],
    /// The kernel has `device_print`s (a print buffer: `print.rs`).
    pub(super) prints: bool,
    pub(super) params_used: Vec<bool>,
    /// The kernel uses cooperative matrices.
    pub(super) coop: bool,
    /// The kernel has a loop.
    pub(super) loops: bool,
}

/// Whether a register type is available on the target (booleans are fine as registers).
pub(super) fn check_type(k: &ThreadKernel, t: &SpirvTarget, ty: ScalarType, whose: &dyn Fn() -> String) -> R<()> {
    let missing = |what: &'static str, feature: &str| {
        Err(unsupported(
            k,
            what,
            format!("{} is {what}, which needs the device's {feature} feature", whose()),
        ))
    };
    match ty {
        ScalarType::Bool | ScalarType::I32 | ScalarType::U32 | ScalarType::F32 => Ok(()),
        ScalarType::F16 if !t.shader_f16 => missing("f16", "shader-f16"),
        ScalarType::I64 if !t.shader_i64 => missing("i64", "shader-int64"),
        ScalarType::U64 if !t.shader_i64 => missing("u64", "shader-int64"),
        ScalarType::F64 if !t.shader_f64 => missing("f64", "shader-f64"),
        ScalarType::F16 | ScalarType::I64 | ScalarType::U64 | ScalarType::F64 => Ok(()),
        // Registers of 8- and 16-bit integers live in 32-bit ones (see `narrow`), those of
        // bf16 and fp8 in f32 ones (`bf16.rs`, `fp8.rs`).
        ScalarType::I8
        | ScalarType::U8
        | ScalarType::I16
        | ScalarType::U16
        | ScalarType::BF16
        | ScalarType::F8E4M3
        | ScalarType::F8E5M2
        | ScalarType::F8E4M3B15
        | ScalarType::F8E4M3Fnuz
        | ScalarType::F8E5M2Fnuz => Ok(()),
    }
}

/// Whether the target takes the kernel's cooperative matrices: the device has them, and
/// naga can express their sizes (8 or 16) and element types (f16, f32).
fn check_coop(k: &ThreadKernel, t: &SpirvTarget) -> R<()> {
    if !t.cooperative_matrix {
        return Err(unsupported(
            k,
            "cooperative matrices",
            "the device has no cooperative matrices (VK_KHR_cooperative_matrix)".into(),
        ));
    }
    for (i, m) in k.coop.iter().enumerate() {
        let sizes = [m.rows, m.cols].iter().all(|&d| d == 8 || d == 16);
        if !sizes || !matches!(m.elem, ScalarType::F16 | ScalarType::F32) {
            return Err(unsupported(
                k,
                "cooperative matrices",
                format!(
                    "c{i} is {}x{} of {}; naga has 8 or 16 rows and columns of f16 or f32",
                    m.rows, m.cols, m.elem
                ),
            ));
        }
        check_type(k, t, m.elem, &|| format!("cooperative matrix c{i}"))?;
    }
    Ok(())
}

pub(super) fn is_narrow(t: ScalarType) -> bool {
    matches!(t, ScalarType::I8 | ScalarType::U8 | ScalarType::I16 | ScalarType::U16)
}

/// Whether a type can be an element of a storage or workgroup buffer.
pub(super) fn check_memory_type(
    k: &ThreadKernel,
    t: &SpirvTarget,
    ty: ScalarType,
    whose: &dyn Fn() -> String,
) -> R<()> {
    if ty == ScalarType::Bool {
        return Err(unsupported(
            k,
            "i1",
            format!("{} holds booleans, which have no storage type in WGSL/naga", whose()),
        ));
    }
    // Types narrower than a word are packed in words in storage buffers (`sub_word.rs`)
    // and widened in workgroup arrays.
    check_type(k, t, ty, whose)
}

impl Scan {
    pub(super) fn new(k: &ThreadKernel, t: &SpirvTarget) -> R<Scan> {
        for (i, p) in k.params.iter().enumerate() {
            match p {
                ThreadParam::Ptr { name, elem } => {
                    check_memory_type(k, t, *elem, &|| format!("pointer parameter {i} (`{name}`)"))?
                }
                ThreadParam::Scalar { name, ty } => {
                    check_type(k, t, *ty, &|| format!("scalar parameter {i} (`{name}`)"))?
                }
            }
        }
        for (i, a) in k.shared.iter().enumerate() {
            check_memory_type(k, t, a.elem, &|| format!("shared buffer {i}"))?;
        }
        for (r, d) in k.regs.iter() {
            check_type(k, t, d.ty, &|| format!("register r{}", r.index()))?;
        }
        let n = k.regs.len();
        let mut s = Scan {
            atomic: vec![false; k.params.len()],
            vec4: vec![false; k.params.len()],
            whole_16: vec![true; k.params.len()],
            partial_words: vec![false; k.params.len()],
            fewest: vec![rutile_ir::thread::MAX_VECTOR; k.params.len()],
            combine_words: false,
            value_reg: vec![false; n],
            shuffles: false,
            thread_id: false,
            program_id: [false; 3],
            num_programs: [false; 3],
            prints: false,
            params_used: vec![false; k.params.len()],
            coop: false,
            loops: false,
        };
        let mut regs = RegUses {
            defs: vec![0; n],
            nested: vec![false; n],
            early: vec![false; n],
        };
        let mut err = None;
        s.walk(k, t, &k.body, 0, &mut regs, &mut err);
        if let Some(e) = err {
            return Err(e);
        }
        for i in 0..n {
            s.value_reg[i] = regs.defs[i] == 1 && !regs.nested[i] && !regs.early[i];
        }
        if s.partial_words.iter().any(|&p| p) && t.subgroups && t.subgroup_size == Some(k.warp_size) {
            s.combine_words = true;
            s.shuffles = true;
        }
        if s.coop {
            check_coop(k, t)?;
            // A warp's matrices are its subgroup's: lanes must be numbered as the
            // subgroup numbers them (the shuffles' condition below).
            s.shuffles = true;
        }
        if s.shuffles {
            if !t.subgroups {
                return Err(unsupported(
                    k,
                    "shuffles",
                    "the kernel shuffles between lanes and the device has no subgroup operations".into(),
                ));
            }
            if t.subgroup_size != Some(k.warp_size) {
                return Err(unsupported(
                    k,
                    "shuffles",
                    format!(
                        "the kernel shuffles within warps of {} lanes, which needs a fixed subgroup size of {}; the device's is {}",
                        k.warp_size,
                        k.warp_size,
                        t.subgroup_size.map_or("not fixed".to_string(), |n| n.to_string())
                    ),
                ));
            }
        }
        Ok(s)
    }

    #[allow(clippy::too_many_arguments)]
    pub(super) fn walk(
        &mut self,
        k: &ThreadKernel,
        t: &SpirvTarget,
        stmts: &[Stmt],
        depth: u32,
        regs: &mut RegUses,
        err: &mut Option<SpirvError>,
    ) {
        for s in stmts {
            match s {
                Stmt::Set { dst, expr } => {
                    match expr {
                        Expr::Const(_) => {}
                        Expr::Param(i) => self.params_used[*i as usize] = true,
                        Expr::Special(Special::ThreadId) => self.thread_id = true,
                        Expr::Special(Special::ProgramId(a)) => self.program_id[*a as usize % 3] = true,
                        Expr::Special(Special::NumPrograms(a)) => self.num_programs[*a as usize % 3] = true,
                        Expr::Copy(a) | Expr::Unary(_, a) | Expr::Cast(a) | Expr::Bitcast(a) => regs.use_(*a),
                        Expr::Binary(_, a, b) | Expr::Compare(_, a, b) => {
                            regs.use_(*a);
                            regs.use_(*b);
                        }
                        Expr::Select(a, b, c) | Expr::Fma(a, b, c) | Expr::BytePerm(a, b, c) => {
                            regs.use_(*a);
                            regs.use_(*b);
                            regs.use_(*c);
                        }
                        Expr::Rounded(_, _, args) => args.iter().for_each(|a| regs.use_(*a)),
                        Expr::ShuffleXor { value, .. } => {
                            self.shuffles = true;
                            regs.use_(*value);
                        }
                        Expr::ShuffleIdx { value, lane } => {
                            self.shuffles = true;
                            regs.use_(*value);
                            regs.use_(*lane);
                        }
                    }
                    regs.def(*dst, depth, false);
                }
                Stmt::Load {
                    dsts, index, pred, mem, ..
                } => {
                    if let Memory::Global { param } = mem {
                        self.vec4[*param as usize] |= dsts.len() % 4 == 0;
                        self.whole_16[*param as usize] &= dsts.len() % 8 == 0;
                        self.fewest[*param as usize] = self.fewest[*param as usize].min(dsts.len());
                    }
                    regs.use_(*index);
                    if let Some(p) = pred {
                        regs.use_(*p);
                    }
                    for d in dsts {
                        regs.def(*d, depth, pred.is_some());
                    }
                }
                Stmt::Store {
                    values,
                    index,
                    pred,
                    mem,
                } => {
                    if let Memory::Global { param } = mem {
                        self.vec4[*param as usize] |= values.len() % 4 == 0;
                        self.whole_16[*param as usize] &= values.len() % 8 == 0;
                        self.fewest[*param as usize] = self.fewest[*param as usize].min(values.len());
                        if let ThreadParam::Ptr { elem, .. } = k.params[*param as usize] {
                            self.partial_words[*param as usize] |= values.len() * elem.size_bytes() % 4 != 0;
                        }
                    }
                    regs.use_(*index);
                    if let Some(p) = pred {
                        regs.use_(*p);
                    }
                    for v in values {
                        regs.use_(*v);
                    }
                }
                Stmt::Atomic {
                    dst,
                    op,
                    param,
                    index,
                    value,
                    pred,
                    ..
                } => {
                    for r in [Some(*index), Some(*value), *pred].into_iter().flatten() {
                        regs.use_(r);
                    }
                    regs.def(*dst, depth, pred.is_some());
                    self.atomic[*param as usize] = true;
                    let ty = k.reg_type(*value);
                    let ok = match ty {
                        ScalarType::I32 | ScalarType::U32 => true,
                        ScalarType::F32 => matches!(op, AtomicOp::Add | AtomicOp::Min | AtomicOp::Max | AtomicOp::Xchg),
                        _ => false,
                    };
                    if !ok && err.is_none() {
                        *err = Some(atomic_unsupported(k, ty, op.name()));
                    }
                }
                Stmt::AtomicCas {
                    dst,
                    param,
                    index,
                    cmp,
                    value,
                    pred,
                    ..
                } => {
                    for r in [Some(*index), Some(*cmp), Some(*value), *pred].into_iter().flatten() {
                        regs.use_(r);
                    }
                    regs.def(*dst, depth, pred.is_some());
                    self.atomic[*param as usize] = true;
                    let ty = k.reg_type(*value);
                    if !matches!(ty, ScalarType::I32 | ScalarType::U32 | ScalarType::F32) && err.is_none() {
                        *err = Some(atomic_unsupported(k, ty, "atomic_cas"));
                    }
                }
                Stmt::CoopLoad { index, .. } | Stmt::CoopStore { index, .. } => {
                    self.coop = true;
                    regs.use_(*index);
                }
                Stmt::CoopMulAdd { .. } | Stmt::CoopMul { .. } | Stmt::CoopZero { .. } => self.coop = true,
                Stmt::Print {
                    coords,
                    values,
                    pred,
                    program,
                    ..
                } => {
                    // Records go to the print buffer (`print.rs`), with the program ids.
                    self.prints = true;
                    for &r in coords.iter().chain(values).chain(pred).chain(program.iter().flatten()) {
                        regs.use_(r);
                    }
                    if program.is_none() {
                        self.program_id = [true; 3];
                    }
                    for &v in values {
                        let ty = k.reg_type(v);
                        if ty.size_bytes() == 8 && !t.shader_i64 && err.is_none() {
                            *err = Some(unsupported(
                                k,
                                "device_print",
                                format!("printing a {ty} needs 64-bit integers, which this device lacks"),
                            ));
                        }
                    }
                }
                Stmt::Barrier | Stmt::Comment(_) => {}
                Stmt::If {
                    cond,
                    then_body,
                    else_body,
                } => {
                    regs.use_(*cond);
                    self.walk(k, t, then_body, depth + 1, regs, err);
                    self.walk(k, t, else_body, depth + 1, regs, err);
                }
                Stmt::While { cond_body, cond, body } => {
                    self.loops = true;
                    self.walk(k, t, cond_body, depth + 1, regs, err);
                    regs.use_(*cond);
                    self.walk(k, t, body, depth + 1, regs, err);
                }
                // What the lowering makes only for PTX targets: the first one refused.
                other => {
                    if let Some(e) = nvidia_only(k, other) {
                        err.get_or_insert(e);
                    }
                }
            }
        }
    }
}

/// Definitions and uses of registers, in program order.
pub(super) struct RegUses {
    pub(super) defs: Vec<u32>,
    /// Defined inside control flow or under a predicate.
    pub(super) nested: Vec<bool>,
    /// Used before its first definition.
    pub(super) early: Vec<bool>,
}

impl RegUses {
    pub(super) fn use_(&mut self, r: Reg) {
        if self.defs[r.index()] == 0 {
            self.early[r.index()] = true;
        }
    }
    pub(super) fn def(&mut self, r: Reg, depth: u32, predicated: bool) {
        self.defs[r.index()] += 1;
        if depth > 0 || predicated {
            self.nested[r.index()] = true;
        }
    }
}

pub(super) fn atomic_unsupported(k: &ThreadKernel, ty: ScalarType, op: &str) -> SpirvError {
    let detail = if ty.bits() == 64 {
        format!("`{op}` on {ty}: 64-bit atomics are not supported by this backend")
    } else {
        format!("`{op}` on {ty}: atomics are on i32 and u32 (and f32 add, min, max, exchange and compare-and-swap)")
    };
    unsupported(k, "atomic", detail)
}
