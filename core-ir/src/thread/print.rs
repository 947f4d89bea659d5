//! Text form of per-thread kernels, for dumps and tests.

use super::{Expr, Memory, Reg, Special, Stmt, ThreadKernel, ThreadParam};
use std::fmt::{self, Write};

impl fmt::Display for ThreadKernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "thread_kernel {}(", self.name)?;
        for (i, p) in self.params.iter().enumerate() {
            if i > 0 {
                write!(f, ", ")?;
            }
            match p {
                ThreadParam::Ptr { name, elem } => write!(f, "{name}: *{elem}")?,
                ThreadParam::Scalar { name, ty } => write!(f, "{name}: {ty}")?,
            }
        }
        write!(f, ") warps={} warp_size={}", self.num_warps, self.warp_size)?;
        if self.producer_warps > 0 {
            write!(f, " producer_warps={}", self.producer_warps)?;
        }
        if let Some(b) = self.block_programs {
            write!(f, " programs_per_block={}", b.programs)?;
        }
        if self.persistent.is_some() {
            write!(f, " persistent")?;
        }
        if self.cluster > 1 {
            write!(f, " cluster={}", self.cluster)?;
        }
        writeln!(f, " {{")?;
        for (i, a) in self.shared.iter().enumerate() {
            writeln!(f, "  shared{i}: [{}; {}]", a.elem, a.len)?;
        }
        for (i, c) in self.coop.iter().enumerate() {
            writeln!(f, "  c{i}: coop {:?} {}x{} {}", c.role, c.rows, c.cols, c.elem)?;
        }
        let mut out = String::new();
        self.stmts(&mut out, &self.body, 1);
        write!(f, "{out}}}")
    }
}

/// The matrices of an `ldmatrix` of `regs` registers from shared buffer `alloc`: 2
/// registers each of 16-bit elements, 1 of 32-bit ones. (The printer also shows kernels
/// whose buffers are missing.)
fn ldmatrix_count(k: &ThreadKernel, regs: usize, alloc: u32) -> usize {
    match k.shared.get(alloc as usize) {
        Some(a) if a.elem.size_bytes() == 4 => regs,
        _ => regs / 2,
    }
}

fn mem(m: &Memory) -> String {
    match m {
        Memory::Global { param } => format!("global{param}"),
        Memory::Shared { alloc } => format!("shared{alloc}"),
    }
}

impl ThreadKernel {
    /// One statement as the printer writes it; of an `if` or `while`, only its first line.
    pub fn stmt_text(&self, s: &Stmt) -> String {
        let head = match s {
            Stmt::If { cond, .. } => Stmt::If {
                cond: *cond,
                then_body: vec![],
                else_body: vec![],
            },
            Stmt::While { cond, .. } => Stmt::While {
                cond_body: vec![],
                cond: *cond,
                body: vec![],
            },
            s => s.clone(),
        };
        let mut out = String::new();
        self.stmts(&mut out, std::slice::from_ref(&head), 0);
        out.lines().next().unwrap_or("").trim().to_string()
    }

    fn r(&self, r: super::Reg) -> String {
        format!("r{}", r.index())
    }
    fn regs(&self, rs: &[super::Reg]) -> String {
        rs.iter().map(|&r| self.r(r)).collect::<Vec<_>>().join(", ")
    }
    fn pred(&self, p: &Option<super::Reg>) -> String {
        p.map(|p| format!("@{} ", self.r(p))).unwrap_or_default()
    }

    fn stmts(&self, out: &mut String, stmts: &[Stmt], depth: usize) {
        let pad = "  ".repeat(depth);
        for s in stmts {
            let _ = match s {
                Stmt::Set { dst, expr } => {
                    writeln!(
                        out,
                        "{pad}{}: {} = {}",
                        self.r(*dst),
                        self.reg_type(*dst),
                        self.expr(expr)
                    )
                }
                Stmt::Load {
                    dsts,
                    mem: m,
                    index,
                    pred,
                    cache,
                } => {
                    writeln!(
                        out,
                        "{pad}{}{} = load{} {}[{}]",
                        self.pred(pred),
                        self.regs(dsts),
                        cache.name().map(|c| format!(".{c}")).unwrap_or_default(),
                        mem(m),
                        self.r(*index)
                    )
                }
                Stmt::Store {
                    values,
                    mem: m,
                    index,
                    pred,
                } => {
                    writeln!(
                        out,
                        "{pad}{}store {}[{}] = {}",
                        self.pred(pred),
                        mem(m),
                        self.r(*index),
                        self.regs(values)
                    )
                }
                Stmt::Atomic {
                    dst,
                    op,
                    param,
                    index,
                    value,
                    pred,
                    order,
                } => writeln!(
                    out,
                    "{pad}{}{} = {}{} global{param}[{}], {}",
                    self.pred(pred),
                    self.r(*dst),
                    op.name(),
                    order_suffix(*order),
                    self.r(*index),
                    self.r(*value)
                ),
                Stmt::AtomicCas {
                    dst,
                    param,
                    index,
                    cmp,
                    value,
                    pred,
                    order,
                } => writeln!(
                    out,
                    "{pad}{}{} = atomic_cas{} global{param}[{}], {}, {}",
                    self.pred(pred),
                    self.r(*dst),
                    order_suffix(*order),
                    self.r(*index),
                    self.r(*cmp),
                    self.r(*value)
                ),
                Stmt::Mma { d, a, b, c } => {
                    let list = |rs: &[Reg]| rs.iter().map(|&r| self.r(r)).collect::<Vec<_>>().join(", ");
                    writeln!(
                        out,
                        "{pad}{} = mma.m16n8k16 [{}] * [{}] + [{}]",
                        list(d),
                        list(a),
                        list(b),
                        list(c)
                    )
                }
                Stmt::MmaTf32 { d, a, b, c } => {
                    let list = |rs: &[Reg]| rs.iter().map(|&r| self.r(r)).collect::<Vec<_>>().join(", ");
                    writeln!(
                        out,
                        "{pad}{} = mma.m16n8k8.tf32 [{}] * [{}] + [{}]",
                        list(d),
                        list(a),
                        list(b),
                        list(c)
                    )
                }
                Stmt::CoopLoad {
                    dst,
                    alloc,
                    index,
                    stride,
                    row_major,
                } => writeln!(
                    out,
                    "{pad}c{dst} = coop_load.{} shared{alloc}[{}] stride {stride}",
                    if *row_major { "row" } else { "col" },
                    self.r(*index)
                ),
                Stmt::CoopStore {
                    src,
                    alloc,
                    index,
                    stride,
                    row_major,
                } => writeln!(
                    out,
                    "{pad}coop_store.{} shared{alloc}[{}] stride {stride} = c{src}",
                    if *row_major { "row" } else { "col" },
                    self.r(*index)
                ),
                Stmt::CoopMulAdd { d, a, b, c } => writeln!(out, "{pad}c{d} = coop_muladd c{a} * c{b} + c{c}"),
                Stmt::CoopMul { d, a, b } => writeln!(out, "{pad}c{d} = coop_mul c{a} * c{b}"),
                Stmt::CoopZero { dst } => writeln!(out, "{pad}c{dst} = coop_zero"),
                Stmt::LdMatrix {
                    dsts,
                    alloc,
                    index,
                    trans,
                } => writeln!(
                    out,
                    "{pad}{} = ldmatrix.x{}{} shared{alloc}[{}]",
                    self.regs(dsts),
                    ldmatrix_count(self, dsts.len(), *alloc),
                    if *trans { ".trans" } else { "" },
                    self.r(*index)
                ),
                Stmt::AsyncCopy {
                    alloc,
                    dst,
                    param,
                    src,
                    len,
                    pred,
                } => writeln!(
                    out,
                    "{pad}async_copy shared{alloc}[{}] = global{param}[{}] x{len}{}",
                    self.r(*dst),
                    self.r(*src),
                    pred.map(|p| format!(" if {} else zeros", self.r(p)))
                        .unwrap_or_default()
                ),
                Stmt::MbarrierInit { bar, count, pred } => writeln!(
                    out,
                    "{pad}mbarrier_init shared{}[{}] count {count}{}",
                    bar.alloc,
                    self.r(bar.index),
                    pred.map(|p| format!(" if {}", self.r(p))).unwrap_or_default()
                ),
                Stmt::MbarrierArriveExpectTx { bar, bytes, pred } => writeln!(
                    out,
                    "{pad}mbarrier_arrive_expect_tx shared{}[{}] bytes {bytes}{}",
                    bar.alloc,
                    self.r(bar.index),
                    pred.map(|p| format!(" if {}", self.r(p))).unwrap_or_default()
                ),
                Stmt::MbarrierWait { bar, parity } => writeln!(
                    out,
                    "{pad}mbarrier_wait shared{}[{}] parity {}",
                    bar.alloc,
                    self.r(bar.index),
                    self.r(*parity)
                ),
                Stmt::MbarrierArrive { bar, pred } => writeln!(
                    out,
                    "{pad}mbarrier_arrive shared{}[{}]{}",
                    bar.alloc,
                    self.r(bar.index),
                    pred.map(|p| format!(" if {}", self.r(p))).unwrap_or_default()
                ),
                Stmt::NamedBarrier { id, threads } => writeln!(out, "{pad}barrier {id} threads {threads}"),
                Stmt::Turn {
                    id,
                    threads,
                    wait,
                    pred,
                } => writeln!(
                    out,
                    "{pad}turn_{} barrier {} threads {threads}{}",
                    if *wait { "wait" } else { "pass" },
                    self.r(*id),
                    pred.map(|p| format!(" if {}", self.r(p))).unwrap_or_default()
                ),
                Stmt::ClusterStore {
                    alloc,
                    index,
                    rank,
                    value,
                    pred,
                } => writeln!(
                    out,
                    "{pad}cluster_store shared{alloc}[{}] of rank {} = {}{}",
                    self.r(*index),
                    self.r(*rank),
                    self.r(*value),
                    pred.map(|p| format!(" if {}", self.r(p))).unwrap_or_default()
                ),
                Stmt::ClusterBarrier => writeln!(out, "{pad}cluster_barrier"),
                Stmt::ClusterArrive => writeln!(out, "{pad}cluster_arrive"),
                Stmt::ClusterWait => writeln!(out, "{pad}cluster_wait"),
                Stmt::SetMaxRegisters { count, increase } => writeln!(
                    out,
                    "{pad}set_max_registers {} {count}",
                    if *increase { "inc" } else { "dec" }
                ),
                Stmt::MbarrierInval { bar, pred } => writeln!(
                    out,
                    "{pad}mbarrier_inval shared{}[{}]{}",
                    bar.alloc,
                    self.r(bar.index),
                    pred.map(|p| format!(" if {}", self.r(p))).unwrap_or_default()
                ),
                Stmt::TmaLoad {
                    map,
                    alloc,
                    dst,
                    coords,
                    bar,
                    pred,
                } => writeln!(
                    out,
                    "{pad}tma_load shared{alloc}[{}] = map{map}[{}] on shared{}[{}]{}",
                    self.r(*dst),
                    coords.iter().map(|&c| self.r(c)).collect::<Vec<_>>().join(", "),
                    bar.alloc,
                    self.r(bar.index),
                    pred.map(|p| format!(" if {}", self.r(p))).unwrap_or_default()
                ),
                Stmt::TmaStore {
                    map,
                    alloc,
                    src,
                    coords,
                    pred,
                } => writeln!(
                    out,
                    "{pad}tma_store map{map}[{}] = shared{alloc}[{}]{}",
                    coords.iter().map(|&c| self.r(c)).collect::<Vec<_>>().join(", "),
                    self.r(*src),
                    pred.map(|p| format!(" if {}", self.r(p))).unwrap_or_default()
                ),
                Stmt::BulkCommit { pred } => writeln!(
                    out,
                    "{pad}bulk_commit{}",
                    pred.map(|p| format!(" if {}", self.r(p))).unwrap_or_default()
                ),
                Stmt::BulkWaitRead { alloc, pred } => writeln!(
                    out,
                    "{pad}bulk_wait_read shared{alloc}{}",
                    pred.map(|p| format!(" if {}", self.r(p))).unwrap_or_default()
                ),
                Stmt::AsyncCommit => writeln!(out, "{pad}async_commit"),
                Stmt::AsyncWait { pending } => writeln!(out, "{pad}async_wait {pending}"),
                Stmt::FenceProxyAsync => writeln!(out, "{pad}fence_proxy_async"),
                Stmt::Wgmma {
                    acc,
                    a,
                    b,
                    n,
                    accumulate,
                } => {
                    let operand = |m: &crate::thread::SmemMatrix| {
                        format!(
                            "shared{}[{} + {}] {:?}-major swizzle {} lbo {} sbo {}",
                            m.alloc,
                            self.r(m.index),
                            m.offset,
                            m.major,
                            m.swizzle,
                            m.lbo,
                            m.sbo
                        )
                    };
                    let a = match a {
                        crate::thread::WgmmaA::Shared(m) => operand(m),
                        crate::thread::WgmmaA::Registers(r) => self.regs(r),
                    };
                    writeln!(
                        out,
                        "{pad}{} {} wgmma.m64n{n}k16 ({}) * ({})",
                        self.regs(acc),
                        if *accumulate { "+=" } else { "=" },
                        a,
                        operand(b)
                    )
                }
                Stmt::WgmmaFence => writeln!(out, "{pad}wgmma_fence"),
                Stmt::WgmmaCommit => writeln!(out, "{pad}wgmma_commit"),
                Stmt::WgmmaWait { pending } => writeln!(out, "{pad}wgmma_wait {pending}"),
                Stmt::Print {
                    prefix,
                    coords,
                    values,
                    pred,
                    program,
                } => writeln!(
                    out,
                    "{pad}print {prefix:?}{} idx ({}): {}{}",
                    program.map(|p| format!(" pid ({})", self.regs(&p))).unwrap_or_default(),
                    self.regs(coords),
                    self.regs(values),
                    pred.map(|p| format!(" if {}", self.r(p))).unwrap_or_default()
                ),
                Stmt::Barrier => writeln!(out, "{pad}barrier"),
                Stmt::Comment(c) => writeln!(out, "{pad}// {c}"),
                Stmt::If {
                    cond,
                    then_body,
                    else_body,
                } => {
                    let _ = writeln!(out, "{pad}if {} {{", self.r(*cond));
                    self.stmts(out, then_body, depth + 1);
                    if !else_body.is_empty() {
                        let _ = writeln!(out, "{pad}}} else {{");
                        self.stmts(out, else_body, depth + 1);
                    }
                    writeln!(out, "{pad}}}")
                }
                Stmt::While { cond_body, cond, body } => {
                    let _ = writeln!(out, "{pad}while {{");
                    self.stmts(out, cond_body, depth + 1);
                    let _ = writeln!(out, "{pad}}} {} {{", self.r(*cond));
                    self.stmts(out, body, depth + 1);
                    writeln!(out, "{pad}}}")
                }
                Stmt::Specialized { producer, consumer } => {
                    let _ = writeln!(out, "{pad}producer {{");
                    self.stmts(out, producer, depth + 1);
                    let _ = writeln!(out, "{pad}}} consumer {{");
                    self.stmts(out, consumer, depth + 1);
                    writeln!(out, "{pad}}}")
                }
            };
        }
    }

    fn expr(&self, e: &Expr) -> String {
        match e {
            Expr::Const(l) => format!("{l}"),
            Expr::Param(i) => format!("param {}", self.params[*i as usize].name()),
            Expr::Special(Special::ThreadId) => "thread_id".into(),
            Expr::Special(Special::ProgramId(a)) => format!("program_id {a}"),
            Expr::Special(Special::NumPrograms(a)) => format!("num_programs {a}"),
            Expr::Copy(r) => self.r(*r),
            Expr::Unary(op, a) => format!("{} {}", op.name(), self.r(*a)),
            Expr::Binary(op, a, b) => format!("{} {}, {}", op.name(), self.r(*a), self.r(*b)),
            Expr::Compare(op, a, b) => format!("{} {}, {}", op.name(), self.r(*a), self.r(*b)),
            Expr::Select(c, a, b) => format!("select {}, {}, {}", self.r(*c), self.r(*a), self.r(*b)),
            Expr::Fma(a, b, c) => format!("fma {}, {}, {}", self.r(*a), self.r(*b), self.r(*c)),
            Expr::BytePerm(a, b, s) => format!("byte_perm {}, {}, {}", self.r(*a), self.r(*b), self.r(*s)),
            Expr::Rounded(op, rounding, args) => {
                let args: Vec<String> = args.iter().map(|a| self.r(*a)).collect();
                format!("{} {}", op.name(*rounding), args.join(", "))
            }
            Expr::Cast(a) => format!("cast {}", self.r(*a)),
            Expr::Bitcast(a) => format!("bitcast {}", self.r(*a)),
            Expr::ShuffleXor { value, mask } => format!("shuffle_xor {}, {mask}", self.r(*value)),
            Expr::ShuffleIdx { value, lane } => format!("shuffle_idx {}, {}", self.r(*value), self.r(*lane)),
        }
    }
}

/// `.sem.scope` after an atomic's name where its ordering is not the default
/// (acquire-release at device scope), so that the text of default atomics stays as it was.
fn order_suffix(order: crate::ir::AtomicOrder) -> String {
    if order == crate::ir::AtomicOrder::default() {
        return String::new();
    }
    let (sem, scope) = order.names();
    format!(".{sem}.{scope}")
}
