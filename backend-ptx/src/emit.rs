//! The driver: header, entry and parameters, register and shared-memory declarations, and
//! the statement walk that hands each statement to its module.

use crate::names::{mem_ty, Class, RegFile};
use crate::{atomic, control, expr, memory, tma, wgmma, PtxError, PtxTarget};
use rutile_ir::thread::{product_pairs, word_halves, ProductRole, Reg, Stmt, ThreadKernel, ThreadParam, WordHalf};
use rutile_ir::ScalarType;
use std::fmt::Write;

/// The error of a statement's translation, before it is tied to the statement's text.
pub(crate) type Res<T = ()> = Result<T, String>;

/// State of one kernel's translation.
pub(crate) struct Emitter<'a> {
    pub k: &'a ThreadKernel,
    pub target: &'a PtxTarget,
    pub regs: RegFile,
    body: String,
    depth: usize,
    labels: u32,
    /// A predicate register that guards every instruction emitted while it is set.
    guard: Option<String>,
    /// The global address (after `cvta.to.global`) of each pointer parameter.
    pub ptr_base: Vec<Option<String>>,
    /// The 32-bit shared address of each shared buffer.
    pub smem_base: Vec<String>,
    /// The generic address of each tensor map (`ThreadKernel::tensor_maps`).
    pub tmap_base: Vec<String>,
    /// Module-scope declarations of `device_print`: its format strings.
    print_globals: String,
    print_formats: u32,
    /// The bytes of the local buffer `device_print` passes its arguments in (0: none).
    print_bytes: u32,
    /// The halves of `wgmma` A operands kept packed (`pairs`), and their 32-bit registers.
    pub pairs: crate::pairs::Pairs,
    pub pair_regs: Vec<String>,
    /// Pairs of A operand halves packed before the current MMA group's fence
    /// ([`PtxTarget::pack_before_fence`]), by their registers; cleared at its commit.
    pub prepacked: std::collections::HashMap<(Reg, Reg), String>,
    /// The descriptors of the MMAs emitted since the last other statement
    /// (`wgmma::descriptor`), by operand buffer, base register, constant bits and guard: the
    /// 32-bit halves of each base's descriptor, from which a later MMA's is made by one
    /// addition.
    pub descriptors: std::collections::HashMap<crate::wgmma::DescriptorKey, (String, String)>,
}

impl<'a> Emitter<'a> {
    /// The PTX register of `r`.
    pub fn r(&self, r: Reg) -> String {
        self.regs.name(r)
    }
    /// The type of `r`.
    pub fn ty(&self, r: Reg) -> ScalarType {
        self.k.reg_type(r)
    }
    /// A fresh temporary.
    pub fn tmp(&mut self, c: Class) -> String {
        self.regs.temp(c)
    }
    /// The predicate guarding the instructions emitted now, if any.
    pub fn guard(&self) -> Option<&str> {
        self.guard.as_deref()
    }

    /// Emits one instruction (without the `;`), guarded by the current guard if any.
    pub fn ins(&mut self, text: impl AsRef<str>) {
        self.indent();
        if let Some(g) = &self.guard {
            let _ = write!(self.body, "@{g} ");
        }
        self.body.push_str(text.as_ref());
        self.body.push_str(";\n");
    }
    /// Runs `f` with every instruction it emits guarded by `pred` (when `Some`).
    pub fn guarded<R>(&mut self, pred: Option<String>, f: impl FnOnce(&mut Self) -> R) -> R {
        assert!(self.guard.is_none() || pred.is_none(), "nested instruction guards");
        let old = self.guard.clone();
        if pred.is_some() {
            self.guard = pred;
        }
        let r = f(self);
        self.guard = old;
        r
    }
    /// A line as it is, indented and unguarded (braces of a call's parameter scope).
    pub fn raw(&mut self, line: &str) {
        self.indent();
        self.body.push_str(line);
        self.body.push('\n');
    }
    /// A module-scope constant holding `format` for `vprintf`, and the local buffer of at
    /// least `bytes` its arguments go in: their names.
    pub fn print_format(&mut self, format: &str, bytes: u32) -> (String, String) {
        let name = format!("rutile_fmt_{}", self.print_formats);
        self.print_formats += 1;
        let _ = writeln!(
            self.print_globals,
            ".global .align 1 .b8 {name}[{}] = {{{}}};",
            format.len() + 1,
            crate::print::format_bytes(format)
        );
        self.print_bytes = self.print_bytes.max(bytes);
        (name, "print_buf".into())
    }
    /// A fresh label name.
    pub fn new_label(&mut self) -> String {
        self.labels += 1;
        format!("$L__{}", self.labels)
    }
    /// Places `label` here.
    pub fn place_label(&mut self, label: &str) {
        let _ = writeln!(self.body, "{label}:");
    }
    /// A `// ` comment line (one per line of `text`).
    pub fn comment(&mut self, text: &str) {
        for line in text.lines() {
            self.indent();
            let _ = writeln!(self.body, "// {line}");
        }
    }
    fn indent(&mut self) {
        for _ in 0..=self.depth {
            self.body.push('\t');
        }
    }
    /// Emits `stmts` one level deeper.
    pub fn nested(&mut self, stmts: &[Stmt]) -> Result<(), PtxError> {
        self.depth += 1;
        let r = self.stmts(stmts);
        self.depth -= 1;
        r
    }

    pub fn stmts(&mut self, stmts: &[Stmt]) -> Result<(), PtxError> {
        // Only consecutive MMAs share descriptors: none made before a branch is reused
        // inside it, and none made inside one (which may not have run) after it.
        self.descriptors.clear();
        let wide = (self.target.wide_products && self.guard.is_none()).then(|| product_pairs(self.k, stmts));
        let halves = word_halves(self.k, stmts);
        let mut products: Vec<(String, String)> = Vec::new();
        for (i, s) in stmts.iter().enumerate() {
            if self.target.pack_before_fence && matches!(s, Stmt::WgmmaFence) {
                wgmma::prepack(self, &stmts[i + 1..]);
            }
            match (wide.as_ref().and_then(|w| w[i]), halves[i]) {
                (Some(role), _) => self.wide_product(s, role, &mut products),
                (None, Some(half)) => self.word_half(s, half),
                (None, None) => self.stmt(s)?,
            }
            if !matches!(s, Stmt::Wgmma { .. } | Stmt::Comment(_)) {
                self.descriptors.clear();
            }
            // The second half of a kept pair: the pair is packed now (`pairs`).
            if let Stmt::Set { dst, .. } = s {
                if let Some(lo) = self.pairs.lo_of(*dst) {
                    let pair = &self.pair_regs[self.pairs.pair(lo).expect("a kept pair's low half")];
                    let (l, h) = (self.r(lo), self.r(*dst));
                    self.ins(format!("mov.b32 {pair}, {{{l}, {h}}}"));
                }
            }
        }
        Ok(())
    }

    /// Statement `s` of a product pair (`rutile_ir::thread::product_pairs`,
    /// [`PtxTarget::wide_products`]): the pair's first computes both halves by one
    /// `mul.wide.u32` into the temporaries of a new slot of `products`, and each copies its
    /// own half. `ptxas` makes the product one `IMAD.WIDE.U32` where `mul.hi` and `mul.lo`
    /// were an `IMAD.HI.U32` and an `IMAD`: the seeded dropout's 490 instructions for 8
    /// elements a thread become 386 (sm_90), and its Philox, which bounds it on an H200, runs
    /// 15% faster (docs/performance.md, "Dropout on an H200").
    fn wide_product(&mut self, s: &Stmt, role: ProductRole, products: &mut Vec<(String, String)>) {
        let Stmt::Set { dst, .. } = s else {
            unreachable!("a product pair is of `Set`s")
        };
        let (slot, high) = match role {
            ProductRole::First { slot, a, b, high } => {
                let (wide, lo, hi) = (self.tmp(Class::Rd), self.tmp(Class::R), self.tmp(Class::R));
                let (a, b) = (self.r(a), self.r(b));
                self.ins(format!("mul.wide.u32 {wide}, {a}, {b}"));
                self.ins(format!("mov.b64 {{{lo}, {hi}}}, {wide}"));
                debug_assert_eq!(products.len(), slot);
                products.push((lo, hi));
                (slot, high)
            }
            ProductRole::Second { slot, high } => (slot, high),
        };
        let (lo, hi) = &products[slot];
        let half = if high { hi } else { lo };
        let d = self.r(*dst);
        self.ins(format!("mov.b32 {d}, {half}"));
    }

    /// Statement `s`, a 16-bit float reinterpreting half of a 32-bit word
    /// (`rutile_ir::thread::word_halves`): that half of the word's register, where the
    /// statements as written truncate, shift and mask it. `ptxas` then reads the half in
    /// place, and a pair of such values that an instruction takes packed is the word
    /// itself: the bf16 by fp4 `dot_scaled` loop loses its masks, shifts and repacking
    /// `PRMT`s (docs/performance.md, "fp4 decoded a pair to a word").
    fn word_half(&mut self, s: &Stmt, half: WordHalf) {
        let Stmt::Set { dst, .. } = s else {
            unreachable!("a word half is a `Set`")
        };
        let (d, other, word) = (self.r(*dst), self.tmp(Class::H), self.r(half.word));
        let (lo, hi) = if half.high { (&other, &d) } else { (&d, &other) };
        self.ins(format!("mov.b32 {{{lo}, {hi}}}, {word}"));
    }

    fn stmt(&mut self, s: &Stmt) -> Result<(), PtxError> {
        let r = match s {
            Stmt::Set { dst, expr: e } => expr::set(self, *dst, e),
            Stmt::Load {
                dsts,
                mem,
                index,
                pred,
                cache,
            } => memory::load(self, dsts, *mem, *index, *pred, *cache),
            Stmt::Store {
                values,
                mem,
                index,
                pred,
            } => memory::store(self, values, *mem, *index, *pred),
            Stmt::Atomic { dst, op, value, .. } => atomic::rmw(self, *dst, *op, atomic::Site::of(s), *value),
            Stmt::AtomicCas { dst, cmp, value, .. } => atomic::cas(self, *dst, atomic::Site::of(s), *cmp, *value),
            Stmt::Mma { d, a, b, c } => mma(self, d, a, b, c),
            Stmt::MmaTf32 { d, a, b, c } => mma_tf32(self, d, a, b, c),
            Stmt::LdMatrix {
                dsts,
                alloc,
                index,
                trans,
            } => memory::ldmatrix(self, dsts, *alloc, *index, *trans),
            Stmt::AsyncCopy {
                alloc,
                dst,
                param,
                src,
                len,
                pred,
            } => memory::async_copy(self, *alloc, *dst, *param, *src, *len, *pred),
            Stmt::AsyncCommit => self.sm80("cp.async.commit_group", "cp.async.commit_group".into()),
            Stmt::AsyncWait { pending } => self.sm80("cp.async.wait_group", format!("cp.async.wait_group {pending}")),
            Stmt::Wgmma {
                acc,
                a,
                b,
                n,
                accumulate,
            } => wgmma::wgmma(self, acc, a, b, *n, *accumulate),
            Stmt::FenceProxyAsync => wgmma::ordering(self, "fence.proxy.async.shared::cta"),
            Stmt::WgmmaFence => wgmma::ordering(self, "wgmma.fence.sync.aligned"),
            Stmt::WgmmaCommit => {
                self.prepacked.clear();
                wgmma::ordering(self, "wgmma.commit_group.sync.aligned")
            }
            Stmt::WgmmaWait { pending } => wgmma::ordering(self, &format!("wgmma.wait_group.sync.aligned {pending}")),
            Stmt::MbarrierInit { bar, count, pred } => tma::mbarrier_init(self, bar, *count, *pred),
            Stmt::MbarrierArriveExpectTx { bar, bytes, pred } => tma::arrive_expect_tx(self, bar, *bytes, *pred),
            Stmt::MbarrierWait { bar, parity } => tma::wait(self, bar, *parity),
            Stmt::MbarrierInval { bar, pred } => tma::inval(self, bar, *pred),
            Stmt::MbarrierArrive { bar, pred } => tma::arrive(self, bar, *pred),
            Stmt::NamedBarrier { id, threads } => {
                self.ins(format!("bar.sync {id}, {threads}"));
                Ok(())
            }
            Stmt::Turn {
                id,
                threads,
                wait,
                pred,
            } => {
                let (id, guard) = (self.r(*id), pred.map(|p| self.r(p)));
                let op = if *wait { "bar.sync" } else { "bar.arrive" };
                self.guarded(guard, |e| e.ins(format!("{op} {id}, {threads}")));
                Ok(())
            }
            Stmt::SetMaxRegisters { count, increase } => wgmma::set_max_registers(self, *count, *increase),
            Stmt::ClusterStore {
                alloc,
                index,
                rank,
                value,
                pred,
            } => crate::cluster::store(self, *alloc, *index, *rank, *value, *pred),
            Stmt::ClusterBarrier => crate::cluster::barrier(self),
            Stmt::ClusterArrive => crate::cluster::arrive(self),
            Stmt::ClusterWait => crate::cluster::wait(self),
            Stmt::TmaLoad {
                map,
                alloc,
                dst,
                coords,
                bar,
                pred,
            } => tma::load(self, *map, *alloc, *dst, coords, bar, *pred),
            Stmt::TmaStore {
                map,
                alloc,
                src,
                coords,
                pred,
            } => tma::store(self, *map, *alloc, *src, coords, *pred),
            Stmt::BulkCommit { pred } => tma::bulk(self, "cp.async.bulk.commit_group", *pred),
            Stmt::BulkWaitRead { pred, .. } => tma::bulk(self, "cp.async.bulk.wait_group.read 0", *pred),
            // The lowering makes these only for targets with cooperative matrices (Vulkan).
            Stmt::CoopLoad { .. }
            | Stmt::CoopStore { .. }
            | Stmt::CoopMulAdd { .. }
            | Stmt::CoopMul { .. }
            | Stmt::CoopZero { .. } => {
                Err("cooperative matrices are a Vulkan feature; PTX has `mma` instead".to_string())
            }
            Stmt::Barrier => {
                self.ins("bar.sync 0");
                Ok(())
            }
            Stmt::Print {
                prefix,
                coords,
                values,
                pred,
                program,
            } => crate::print::print(self, prefix, coords, values, *pred, *program),
            Stmt::Comment(c) => {
                self.comment(c);
                Ok(())
            }
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => return control::if_(self, *cond, then_body, else_body),
            Stmt::While { cond_body, cond, body } => return control::while_(self, cond_body, *cond, body),
            Stmt::Specialized { producer, consumer } => return control::specialized(self, producer, consumer),
        };
        r.map_err(|reason| PtxError::Unsupported {
            statement: one_line(self.k, s),
            reason,
        })
    }
}

impl Emitter<'_> {
    /// Emits `text`, an instruction that needs sm_80 or later.
    fn sm80(&mut self, what: &str, text: String) -> Res {
        if self.target.sm < 80 {
            return Err(format!(
                "{what} needs sm_80 or later, the target is sm_{}",
                self.target.sm
            ));
        }
        self.ins(text);
        Ok(())
    }
}

/// `mma.sync.aligned.m16n8k16` (sm_80 and later): the f16 or bf16 fragments are packed
/// in pairs into the 32-bit registers the instruction takes, in the order of `Stmt::Mma`.
fn mma(e: &mut Emitter, d: &[Reg; 4], a: &[Reg; 8], b: &[Reg; 4], c: &[Reg; 4]) -> Res {
    if e.target.sm < 80 {
        return Err(format!(
            "mma.sync.m16n8k16 needs sm_80 or later, the target is sm_{}",
            e.target.sm
        ));
    }
    let input = match e.ty(a[0]) {
        ScalarType::F16 => "f16",
        ScalarType::BF16 => "bf16",
        t => return Err(format!("mma multiplies f16 or bf16, got {t}")),
    };
    let pack = |e: &mut Emitter, pair: &[Reg]| -> String {
        let r = e.tmp(Class::R);
        let (lo, hi) = (e.r(pair[0]), e.r(pair[1]));
        e.ins(format!("mov.b32 {r}, {{{lo}, {hi}}}"));
        r
    };
    let av: Vec<String> = a.chunks(2).map(|p| pack(e, p)).collect();
    let bv: Vec<String> = b.chunks(2).map(|p| pack(e, p)).collect();
    let list = |e: &Emitter, rs: &[Reg]| rs.iter().map(|&r| e.r(r)).collect::<Vec<_>>().join(", ");
    let (dl, cl) = (list(e, d), list(e, c));
    e.ins(format!(
        "mma.sync.aligned.m16n8k16.row.col.f32.{input}.{input}.f32 {{{dl}}}, {{{}}}, {{{}}}, {{{cl}}}",
        av.join(", "),
        bv.join(", ")
    ));
    Ok(())
}

/// `mma.sync.aligned.m16n8k8` on tf32 (sm_80 and later): each f32 operand is rounded into
/// the 32-bit register the instruction takes with `cvt.rna.tf32.f32` (the instruction would
/// otherwise read f32 bits as tf32, which truncates), in the order of `Stmt::MmaTf32`.
fn mma_tf32(e: &mut Emitter, d: &[Reg; 4], a: &[Reg; 4], b: &[Reg; 2], c: &[Reg; 4]) -> Res {
    if e.target.sm < 80 {
        return Err(format!(
            "mma.sync.m16n8k8 on tf32 needs sm_80 or later, the target is sm_{}",
            e.target.sm
        ));
    }
    let tf32 = |e: &mut Emitter, r: Reg| -> String {
        let t = e.tmp(Class::R);
        let f = e.r(r);
        e.ins(format!("cvt.rna.tf32.f32 {t}, {f}"));
        t
    };
    let av: Vec<String> = a.iter().map(|&r| tf32(e, r)).collect();
    let bv: Vec<String> = b.iter().map(|&r| tf32(e, r)).collect();
    let list = |e: &Emitter, rs: &[Reg]| rs.iter().map(|&r| e.r(r)).collect::<Vec<_>>().join(", ");
    let (dl, cl) = (list(e, d), list(e, c));
    e.ins(format!(
        "mma.sync.aligned.m16n8k8.row.col.f32.tf32.tf32.f32 {{{dl}}}, {{{}}}, {{{}}}, {{{cl}}}",
        av.join(", "),
        bv.join(", ")
    ));
    Ok(())
}

/// `s` in the per-thread IR's text form, on one line.
fn one_line(k: &ThreadKernel, s: &Stmt) -> String {
    let t = ThreadKernel {
        body: vec![s.clone()],
        shared: vec![],
        ..k.clone()
    };
    let text = t.to_string();
    text.lines().nth(1).unwrap_or("").trim().to_string()
}

/// The `.param` type of a scalar parameter (the runtime passes each argument with its own
/// size: 1, 2, 4 or 8 bytes).
fn param_decl(name: &str, ty: ScalarType) -> Result<&'static str, PtxError> {
    if ty == ScalarType::Bool {
        return Err(PtxError::Param {
            name: name.into(),
            ty: ty.to_string(),
            reason: "pass booleans as an integer and compare it with 0".into(),
        });
    }
    Ok(mem_ty(ty))
}

pub(crate) fn emit(k: &ThreadKernel, target: &PtxTarget) -> Result<String, PtxError> {
    rutile_ir::thread::verify(k).map_err(PtxError::InvalidKernel)?;
    let fail = |reason: String| PtxError::Target {
        kernel: k.name.clone(),
        target: target.to_string(),
        reason,
    };
    if target.sm < 70 {
        return Err(fail("the PTX backend needs sm_70 or newer".into()));
    }
    if target.ptx_version < (7, 0) {
        return Err(fail("the PTX backend needs PTX ISA 7.0 or newer".into()));
    }
    if k.warp_size != 32 {
        return Err(fail(format!(
            "CUDA warps have 32 threads, the kernel was lowered for {}",
            k.warp_size
        )));
    }
    if k.threads() > 1024 {
        return Err(fail(format!(
            "{} threads per program exceed CUDA's 1024 per block",
            k.threads()
        )));
    }
    if !crate::names::is_identifier(&k.name) {
        return Err(fail(format!("`{}` is not a valid PTX identifier", k.name)));
    }
    let fp8 = k.regs.iter().any(|(_, r)| r.ty.is_ocp_fp8());
    if k.cluster > 1 {
        crate::cluster::require_clusters(target.sm, &format!("a cluster of {} programs", k.cluster)).map_err(fail)?;
    }
    if let Some(count) = target.max_registers.filter(|c| !PtxTarget::MAX_REGISTERS.contains(c)) {
        let (low, high) = PtxTarget::MAX_REGISTERS.into_inner();
        return Err(fail(format!(
            "maxnreg = {count}: a thread's register limit must be {low} to {high}"
        )));
    }
    // The warpgroups' `setmaxnreg` budgets are the thread block's registers at entry as
    // `ptxas` gives them without a limit; under one, the consumers would wait for registers
    // the block does not have (a hang).
    if let Some(count) = target.max_registers {
        let mut moves_registers = false;
        k.walk(&mut |s| moves_registers |= matches!(s, Stmt::SetMaxRegisters { .. }));
        if moves_registers {
            return Err(fail(format!(
                "maxnreg = {count} with a warp-specialized kernel: its producer warpgroup hands its \
             registers to the consumers (setmaxnreg), out of what the thread block holds without \
             a limit; launch it without maxnreg"
            )));
        }
    }

    let mut e = Emitter {
        k,
        target,
        regs: RegFile::new(k),
        body: String::new(),
        depth: 0,
        labels: 0,
        guard: None,
        ptr_base: vec![None; k.params.len()],
        smem_base: vec![],
        tmap_base: vec![],
        print_globals: String::new(),
        print_formats: 0,
        print_bytes: 0,
        pairs: crate::pairs::Pairs::of(k),
        pair_regs: Vec::new(),
        prepacked: std::collections::HashMap::new(),
        descriptors: std::collections::HashMap::new(),
    };
    e.pair_regs = (0..e.pairs.len()).map(|_| e.tmp(Class::R)).collect();

    // Parameters and their prologue: pointers become global addresses once.
    let mut params = Vec::new();
    for (i, p) in k.params.iter().enumerate() {
        let pname = format!("{}_param_{i}", k.name);
        match p {
            ThreadParam::Ptr { name, elem } => {
                params.push(format!("\t.param .u64 {pname}"));
                e.comment(&format!("{name}: *{elem}"));
                let raw = e.tmp(Class::Rd);
                let base = e.tmp(Class::Rd);
                e.ins(format!("ld.param.u64 {raw}, [{pname}]"));
                e.ins(format!("cvta.to.global.u64 {base}, {raw}"));
                e.ptr_base[i] = Some(base);
            }
            ThreadParam::Scalar { name, ty } => {
                params.push(format!("\t.param .{} {pname}", param_decl(name, *ty)?));
            }
        }
    }
    // Tensor maps follow the kernel's own parameters.
    tma::params(&mut e, &mut params).map_err(fail)?;
    // Shared memory is one dynamic buffer (so that a program may use more than the 48 KiB
    // that static shared memory is limited to); each of the kernel's buffers starts at its
    // own boundary in it (`ThreadKernel::shared_offsets`), from a start rounded up to the
    // coarsest one (dynamic shared memory is only sure to start on 16 bytes; the launch
    // gives the slack). The launch gives its size: `dynamic_shared_bytes`.
    let mut shared_decls = String::new();
    if !k.shared.is_empty() {
        // Module scope: `.extern` variables cannot be declared inside an entry.
        let _ = writeln!(
            shared_decls,
            ".extern .shared .align 16 .b8 smem[]; // {} bytes at launch\n",
            dynamic_shared_bytes(k)
        );
        let start = e.tmp(Class::R);
        e.ins(format!("mov.u32 {start}, smem"));
        let align = k.shared_align();
        if align > 16 {
            let bumped = e.tmp(Class::R);
            e.ins(format!("add.u32 {bumped}, {start}, {}", align - 1));
            e.ins(format!("and.b32 {start}, {bumped}, {}", !(align - 1)));
        }
        for (a, offset) in k.shared.iter().zip(k.shared_offsets()) {
            let base = e.tmp(Class::R);
            e.ins(format!("add.u32 {base}, {start}, {offset}; // {} x {}", a.len, a.elem));
            e.smem_base.push(base);
        }
    }
    e.stmts(&k.body)?;
    e.ins("ret");

    let mut out = String::new();
    let _ = writeln!(out, "//\n// Generated by rutile-ptx from kernel `{}`\n//\n", k.name);
    // fp8 conversions on sm_89 need PTX ISA 8.1 (sm_90's 8.0 has them).
    let version = if fp8 && target.sm == 89 && target.has_native_fp8() {
        target.ptx_version.max((8, 1))
    } else {
        target.ptx_version
    };
    let _ = writeln!(out, ".version {}.{}", version.0, version.1);
    // wgmma exists only in the architecture-specific sm_90a.
    let mut wgmma = false;
    k.walk(&mut |s| wgmma |= matches!(s, Stmt::Wgmma { .. } | Stmt::SetMaxRegisters { .. }));
    let suffix = if wgmma { "a" } else { "" };
    let _ = writeln!(out, ".target sm_{}{suffix}", target.sm);
    let _ = writeln!(out, ".address_size 64\n");
    out += &shared_decls;
    if e.print_formats > 0 {
        out += ".extern .func (.param .b32 func_retval0) vprintf\n(\n\t.param .b64 vprintf_param_0,\n\t.param .b64 vprintf_param_1\n);\n";
        out += &e.print_globals;
        out.push('\n');
    }
    let _ = writeln!(out, "\t// .globl\t{}", k.name);
    let _ = writeln!(out, ".visible .entry {}(", k.name);
    let _ = writeln!(out, "{}", params.join(",\n"));
    let _ = writeln!(out, ")");
    let _ = writeln!(out, ".maxntid {}, 1, 1", k.threads());
    if let Some(count) = target.max_registers {
        let _ = writeln!(out, ".maxnreg {count}");
    }
    if k.cluster > 1 {
        // The launch groups the programs so by itself (a plain `cuLaunchKernel`).
        let _ = writeln!(out, ".reqnctapercluster {}, 1, 1", k.cluster);
    }
    let _ = writeln!(out, "{{");
    out += &e.regs.declarations();
    if e.print_bytes > 0 {
        let _ = writeln!(out, "\t.local .align 8 .b8 print_buf[{}];", e.print_bytes);
    }
    out.push('\n');
    out += &e.body;
    out += "}\n";
    Ok(out)
}

/// The dynamic shared memory a launch of the kernel's PTX must provide, in bytes: every
/// shared buffer, each from a 16-byte boundary (0 when the kernel has none).
pub fn dynamic_shared_bytes(k: &ThreadKernel) -> u32 {
    k.shared_bytes()
}
