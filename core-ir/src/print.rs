//! A stable, readable text form of kernels, for dumps, tests and error messages.
//!
//! ```text
//! kernel add(%0: *f32 x, %1: *f32 y, %2: *f32 z, %3: i32 n) {
//!   %4 = program_id 0 : i32
//!   %5 = arange 0, 1024 : <1024xi32>
//!   ...
//!   store %12, %11, %9
//!   hint %5, max_contiguous=[1024]
//! }
//! ```
//! (`hint` lines, last, are the author's promises: [`crate::ir::AxisHint`].)
//! Values are numbered by their arena index, so the text is the same every time the same
//! kernel is built.

use crate::ir::{AtomicOrder, Inst, Kernel, Op, Region, ValueId};
use std::fmt::{self, Write};

impl fmt::Display for Kernel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "kernel {}(", self.name)?;
        for (i, p) in self.params.iter().enumerate() {
            if i > 0 {
                write!(f, ", ")?;
            }
            write!(f, "{}: {} {}", v(p.value), p.ty, p.name)?;
        }
        writeln!(f, ") {{")?;
        self.region(f, &self.body, 1)?;
        // Hints change the code compiled from the same ops: they are part of the text, which
        // keys the runtime's compile cache.
        for h in &self.hints {
            let rank = self
                .values
                .try_get(h.value)
                .map_or(1, |d| d.ty.shape.dims().len().max(1));
            writeln!(f, "  hint {}, {}={:?}", v(h.value), h.kind.name(), &h.per_dim[..rank])?;
        }
        writeln!(f, "}}")
    }
}

/// The text of a kernel (the same as its `Display`).
pub fn print(kernel: &Kernel) -> String {
    kernel.to_string()
}

fn v(id: ValueId) -> String {
    format!("%{}", id.index())
}

/// `, sem=..., scope=...` where an atomic's ordering is not the default (so that the text of
/// kernels with default atomics stays as it was).
fn atomic_order(t: &mut String, order: AtomicOrder) -> fmt::Result {
    if order == AtomicOrder::default() {
        return Ok(());
    }
    let (sem, scope) = order.names();
    write!(t, ", sem={sem}, scope={scope}")
}

fn list(ids: &[ValueId]) -> String {
    ids.iter().map(|&i| v(i)).collect::<Vec<_>>().join(", ")
}

impl Kernel {
    fn region(&self, f: &mut fmt::Formatter<'_>, region: &Region, depth: usize) -> fmt::Result {
        for &id in &region.insts {
            // The printer also shows malformed kernels (the runtime keys its compile cache
            // by the text before verifying), so it indexes nothing unchecked.
            match self.insts.try_get(id) {
                Some(inst) => self.inst(f, inst, depth)?,
                None => writeln!(f, "{}<no instruction {id:?}>", "  ".repeat(depth))?,
            }
        }
        Ok(())
    }

    fn inst(&self, f: &mut fmt::Formatter<'_>, inst: &Inst, depth: usize) -> fmt::Result {
        let pad = "  ".repeat(depth);
        write!(f, "{pad}")?;
        if !inst.results.is_empty() {
            write!(f, "{} = ", list(&inst.results))?;
        }
        let mut text = String::new();
        let t = &mut text;
        let name = inst.op.name();
        let opt = |o: &Option<ValueId>| o.map(v).unwrap_or_else(|| "_".into());
        let _ = match &inst.op {
            Op::ProgramId { axis } | Op::NumPrograms { axis } => write!(t, "{name} {axis}"),
            Op::Constant { value } => write!(t, "{name} {value}"),
            Op::Arange { start, end } => write!(t, "{name} {start}, {end}"),
            Op::ExpandDims { value, axis } => write!(t, "{name} {}, axis={axis}", v(*value)),
            Op::Permute { value, perm } => write!(t, "{name} {}, {perm:?}", v(*value)),
            Op::Reduce { value, axis, .. } => write!(t, "{name} {}, axis={axis}", v(*value)),
            Op::Load {
                ptr,
                mask,
                other,
                cache,
            } => {
                write!(t, "{name} {}, mask={}, other={}", v(*ptr), opt(mask), opt(other))?;
                match cache.name() {
                    Some(c) => write!(t, ", cache={c}"),
                    None => Ok(()),
                }
            }
            Op::Store { ptr, value, mask } => write!(t, "{name} {}, {}, mask={}", v(*ptr), v(*value), opt(mask)),
            Op::Atomic {
                ptr,
                value,
                mask,
                order,
                ..
            } => {
                write!(t, "{name} {}, {}, mask={}", v(*ptr), v(*value), opt(mask))?;
                atomic_order(t, *order)
            }
            Op::AtomicCas {
                ptr,
                cmp,
                value,
                mask,
                order,
            } => {
                write!(t, "{name} {}, {}, {}, mask={}", v(*ptr), v(*cmp), v(*value), opt(mask))?;
                atomic_order(t, *order)
            }
            Op::For {
                start,
                end,
                step,
                init,
                num_stages,
            } => {
                let args = inst.regions.first().map(|r| &r.args[..]).unwrap_or_default();
                write!(
                    t,
                    "{name} {} in range({}, {}, {}",
                    list(&args[..1.min(args.len())]),
                    v(*start),
                    v(*end),
                    v(*step)
                )?;
                match num_stages {
                    Some(s) => write!(t, ", num_stages={s})")?,
                    None => write!(t, ")")?,
                }
                if !init.is_empty() {
                    write!(t, " carry({}) as ({})", list(init), list(&args[1.min(args.len())..]))?;
                }
                Ok(())
            }
            Op::Dot {
                a,
                b,
                acc,
                precision,
                max_num_imprecise_acc,
            } => {
                write!(t, "{name} {}, {}, {}", v(*a), v(*b), v(*acc))?;
                if let Some(p) = precision.name() {
                    write!(t, ", input_precision={p}")?;
                }
                match max_num_imprecise_acc {
                    Some(n) => write!(t, ", max_num_imprecise_acc={n}"),
                    None => Ok(()),
                }
            }
            Op::While { init } => write!(t, "{name} carry({})", list(init)),
            // ---- scans, combine reductions, gather, sort, histogram ----
            Op::Scan { values, axis, reverse } => {
                write!(t, "{name} {}, axis={axis}", list(values))?;
                if *reverse {
                    write!(t, ", reverse")?;
                }
                let args = inst.regions.first().map(|r| &r.args[..]).unwrap_or_default();
                write!(t, " combine({})", list(args))
            }
            Op::ReduceCombine { values, axis } => {
                let args = inst.regions.first().map(|r| &r.args[..]).unwrap_or_default();
                write!(t, "{name} {}, axis={axis} combine({})", list(values), list(args))
            }
            Op::Gather { src, index, axis } => write!(t, "{name} {}, {}, axis={axis}", v(*src), v(*index)),
            Op::Sort {
                value,
                axis,
                descending,
            } => {
                write!(t, "{name} {}, axis={axis}", v(*value))?;
                if *descending {
                    write!(t, ", descending")?;
                }
                Ok(())
            }
            Op::Histogram { value, num_bins } => write!(t, "{name} {}, num_bins={num_bins}", v(*value)),
            Op::ClusterReduce { op, value } => write!(t, "{name} {}, {}", op.name(), v(*value)),
            Op::ClusterReduceCombine { values } => {
                let args = inst.regions.first().map(|r| &r.args[..]).unwrap_or_default();
                write!(t, "{name} {} combine({})", list(values), list(args))
            }
            // ---- end of scans, combine reductions, gather, sort, histogram ----
            Op::Assert { cond, message } => write!(t, "{name} {}, {message:?}", v(*cond)),
            Op::Print { prefix, values } => write!(t, "{name} {prefix:?}, {}", list(values)),
            op if op.operands().is_empty() => write!(t, "{name}"),
            op => write!(t, "{name} {}", list(&op.operands())),
        };
        write!(f, "{text}")?;
        if !inst.results.is_empty() {
            let types: Vec<String> = inst
                .results
                .iter()
                .map(|&r| match self.values.try_get(r) {
                    Some(d) => d.ty.to_string(),
                    None => "<no value>".into(),
                })
                .collect();
            write!(f, " : {}", types.join(", "))?;
        }
        if inst.regions.is_empty() {
            return writeln!(f);
        }
        // Region headers: `while` names its arguments; `if` labels its else branch.
        for (i, region) in inst.regions.iter().enumerate() {
            match (&inst.op, i) {
                (Op::While { .. }, 0) => write!(f, " cond({}) {{", list(&region.args))?,
                (Op::While { .. }, _) => write!(f, " do({}) {{", list(&region.args))?,
                (Op::If { .. }, 1) => write!(f, " else {{")?,
                _ => write!(f, " {{")?,
            }
            writeln!(f)?;
            self.region(f, region, depth + 1)?;
            write!(f, "{pad}}}")?;
        }
        writeln!(f)
    }
}
