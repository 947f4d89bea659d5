//! The translation of a per-thread kernel into a naga module.
//!
//! Every register is a function variable `r{index}` (each `Set` a store, each use a load),
//! except registers set exactly once, at the top level of the body, unpredicated and before
//! any use: those are plain named expressions. Launch values (thread and program ids, grid
//! size) and scalar parameters are read once at the top of the entry point.

use crate::{erf, BindingLayout, SpirvError, SpirvKernel, SpirvTarget};
use naga::{
    AddressSpace, AtomicFunction, BinaryOperator as Bo, Binding, Block, BuiltIn, EntryPoint, Expression, Function,
    FunctionArgument, GatherMode, GlobalVariable, Handle, LocalVariable, MathFunction as Mf, Module, ResourceBinding,
    Scalar, ScalarKind, Span, Statement, StructMember, Type, TypeInner, UnaryOperator as Uo,
};
use rutile_ir::ir::{AtomicOp, BinaryOp, CmpOp, Literal, UnaryOp};
use rutile_ir::thread::{Expr, Memory, Reg, Special, Stmt, ThreadKernel, ThreadParam};
use rutile_ir::ScalarType;

type H = Handle<Expression>;
type R<T> = Result<T, SpirvError>;
const SPAN: Span = Span::UNDEFINED;

/// Translates `kernel` for `target` and validates the result.
pub fn emit(kernel: &ThreadKernel, target: &SpirvTarget) -> Result<SpirvKernel, SpirvError> {
    rutile_ir::thread::verify(kernel).map_err(|message| SpirvError::InvalidKernel {
        kernel: kernel.name.clone(),
        message,
    })?;
    let scan = Scan::new(kernel, target)?;
    let layout = BindingLayout::new(kernel, &scan.atomic, target);
    let mut cx = Cx::new(kernel, &scan, &layout);
    cx.preamble(&scan);
    cx.stmts(&kernel.body)?;
    cx.flush();
    let entry_point = entry_name(&kernel.name);
    let module = cx.finish(&entry_point);

    let mut caps = naga::valid::Capabilities::empty();
    caps.set(naga::valid::Capabilities::SHADER_FLOAT16, target.shader_f16);
    caps.set(naga::valid::Capabilities::SHADER_INT64, target.shader_i64);
    caps.set(naga::valid::Capabilities::FLOAT64, target.shader_f64);
    caps.set(naga::valid::Capabilities::SUBGROUP, target.subgroups);
    caps.set(
        naga::valid::Capabilities::IMMEDIATES,
        layout.launch == crate::LaunchPlace::Immediates,
    );
    let info = match naga::valid::Validator::new(naga::valid::ValidationFlags::all(), caps).validate(&module) {
        Ok(info) => info,
        Err(e) => {
            let mut message = e.to_string();
            let mut source = std::error::Error::source(&e);
            while let Some(s) = source {
                message.push_str(": ");
                message.push_str(&s.to_string());
                source = s.source();
            }
            for (span, label) in e.spans() {
                let _ = span;
                message.push_str(&format!(" [{label}]"));
            }
            return Err(SpirvError::Validation {
                kernel: kernel.name.clone(),
                message,
                wgsl_or_debug_dump: format!("{module:#?}"),
            });
        }
    };
    Ok(SpirvKernel {
        module,
        info,
        entry_point,
        streaming_bindings: crate::hints::streaming_bindings(kernel, &layout),
        bindings: layout,
    })
}

/// The entry point's name: the kernel's, with characters outside `[A-Za-z0-9_]` replaced,
/// and `k_` in front where it would not be a WGSL identifier (so that the WGSL has the same
/// entry point name as the SPIR-V).
fn entry_name(name: &str) -> String {
    let mut s: String = name
        .chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' })
        .collect();
    if s.is_empty()
        || s.starts_with(|c: char| c.is_ascii_digit())
        || s.starts_with("__")
        || naga::keywords::wgsl::RESERVED.contains(&s.as_str())
    {
        s.insert_str(0, "k_");
    }
    s
}

fn unsupported(k: &ThreadKernel, what: &'static str, detail: String) -> SpirvError {
    SpirvError::Unsupported {
        kernel: k.name.clone(),
        what,
        detail,
    }
}

fn invalid(k: &ThreadKernel, message: String) -> SpirvError {
    SpirvError::InvalidKernel {
        kernel: k.name.clone(),
        message,
    }
}

/// What a first pass over the kernel finds: feature checks, atomically used parameters,
/// registers that can be plain expressions, and the launch values in use.
struct Scan {
    atomic: Vec<bool>,
    /// Per parameter: a load or store moves whole 16-byte vectors of it.
    vec4: Vec<bool>,
    value_reg: Vec<bool>,
    shuffles: bool,
    thread_id: bool,
    program_id: [bool; 3],
    num_programs: [bool; 3],
    params_used: Vec<bool>,
}

/// Whether a register type is available on the target (booleans are fine as registers).
fn check_type(k: &ThreadKernel, t: &SpirvTarget, ty: ScalarType, whose: &dyn Fn() -> String) -> R<()> {
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
        ScalarType::BF16 => Err(unsupported(
            k,
            "bf16",
            format!("{} is bf16, which naga cannot represent", whose()),
        )),
        // Registers of 8- and 16-bit integers live in 32-bit ones (see `narrow`).
        ScalarType::I8 | ScalarType::U8 | ScalarType::I16 | ScalarType::U16 => Ok(()),
    }
}

fn is_narrow(t: ScalarType) -> bool {
    matches!(t, ScalarType::I8 | ScalarType::U8 | ScalarType::I16 | ScalarType::U16)
}

/// Whether a type can be an element of a storage or workgroup buffer.
fn check_memory_type(k: &ThreadKernel, t: &SpirvTarget, ty: ScalarType, whose: &dyn Fn() -> String) -> R<()> {
    if ty == ScalarType::Bool {
        return Err(unsupported(
            k,
            "i1",
            format!("{} holds booleans, which have no storage type in WGSL/naga", whose()),
        ));
    }
    if matches!(ty, ScalarType::I8 | ScalarType::U8 | ScalarType::I16 | ScalarType::U16) {
        return Err(unsupported(
            k,
            ty.name(),
            format!("{} holds {ty}, which has no storage type in WGSL/naga", whose()),
        ));
    }
    check_type(k, t, ty, whose)
}

impl Scan {
    fn new(k: &ThreadKernel, t: &SpirvTarget) -> R<Scan> {
        for (i, p) in k.params.iter().enumerate() {
            match p {
                ThreadParam::Ptr { name, elem } => {
                    check_memory_type(k, t, *elem, &|| format!("pointer parameter {i} (`{name}`)"))?
                }
                ThreadParam::Scalar { name, ty } if is_narrow(*ty) => {
                    return Err(unsupported(
                        k,
                        ty.name(),
                        format!("scalar parameter {i} (`{name}`) is {ty}: pass it as a 32-bit integer"),
                    ))
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
            value_reg: vec![false; n],
            shuffles: false,
            thread_id: false,
            program_id: [false; 3],
            num_programs: [false; 3],
            params_used: vec![false; k.params.len()],
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
    fn walk(
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
                        Expr::Select(a, b, c) | Expr::Fma(a, b, c) => {
                            regs.use_(*a);
                            regs.use_(*b);
                            regs.use_(*c);
                        }
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
                        *err = Some(atomic_unsupported(k, t, ty, op.name()));
                    }
                }
                Stmt::AtomicCas {
                    dst,
                    param,
                    index,
                    cmp,
                    value,
                    pred,
                } => {
                    for r in [Some(*index), Some(*cmp), Some(*value), *pred].into_iter().flatten() {
                        regs.use_(r);
                    }
                    regs.def(*dst, depth, pred.is_some());
                    self.atomic[*param as usize] = true;
                    let ty = k.reg_type(*value);
                    if !matches!(ty, ScalarType::I32 | ScalarType::U32 | ScalarType::F32) && err.is_none() {
                        *err = Some(atomic_unsupported(k, t, ty, "atomic_cas"));
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
                    self.walk(k, t, cond_body, depth + 1, regs, err);
                    regs.use_(*cond);
                    self.walk(k, t, body, depth + 1, regs, err);
                }
            }
        }
    }
}

/// Definitions and uses of registers, in program order.
struct RegUses {
    defs: Vec<u32>,
    /// Defined inside control flow or under a predicate.
    nested: Vec<bool>,
    /// Used before its first definition.
    early: Vec<bool>,
}

impl RegUses {
    fn use_(&mut self, r: Reg) {
        if self.defs[r.index()] == 0 {
            self.early[r.index()] = true;
        }
    }
    fn def(&mut self, r: Reg, depth: u32, predicated: bool) {
        self.defs[r.index()] += 1;
        if depth > 0 || predicated {
            self.nested[r.index()] = true;
        }
    }
}

fn atomic_unsupported(k: &ThreadKernel, _t: &SpirvTarget, ty: ScalarType, op: &str) -> SpirvError {
    let detail = if ty.bits() == 64 {
        format!("`{op}` on {ty}: 64-bit atomics are not supported by this backend")
    } else {
        format!("`{op}` on {ty}: atomics are on i32 and u32 (and f32 add, min, max, exchange and compare-and-swap)")
    };
    unsupported(k, "atomic", detail)
}

fn naga_scalar(t: ScalarType) -> Scalar {
    match t {
        ScalarType::Bool => Scalar::BOOL,
        ScalarType::I32 => Scalar::I32,
        ScalarType::U32 => Scalar::U32,
        ScalarType::I64 => Scalar::I64,
        ScalarType::U64 => Scalar::U64,
        ScalarType::F16 => Scalar::F16,
        ScalarType::F32 => Scalar::F32,
        ScalarType::F64 => Scalar::F64,
        // Held sign- or zero-extended in 32 bits.
        ScalarType::I8 | ScalarType::I16 => Scalar::I32,
        ScalarType::U8 | ScalarType::U16 => Scalar::U32,
        // Rejected by the scan.
        ScalarType::BF16 => unreachable!("bf16 has no naga scalar"),
    }
}

/// How a storage buffer holds its elements.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Holding {
    Plain,
    /// `array<vec4<T>>` of a 4-byte `T`: 16-byte loads and stores move a whole vector,
    /// single elements are vector components (the buffer is a multiple of 16 bytes).
    Vec4,
    /// `atomic<i32>` / `atomic<u32>`.
    Atomic,
    /// `atomic<u32>` holding `f32` bits.
    AtomicF32Bits,
}

struct Buffer {
    ptr: H,
    holding: Holding,
    /// The element type of the array (the `vec4` of a [`Holding::Vec4`] buffer).
    elem_ty: Handle<Type>,
}

struct Cx<'a> {
    k: &'a ThreadKernel,
    module: Module,
    f: Function,
    block: Block,
    emit_start: Option<usize>,
    value_reg: Vec<bool>,
    local: Vec<Option<H>>,
    value: Vec<Option<H>>,
    /// Per parameter: its storage buffer (pointers).
    buffers: Vec<Option<Buffer>>,
    /// Per parameter: its value, read at the top (scalars in use).
    param_value: Vec<Option<H>>,
    shared: Vec<H>,
    /// The launch block (uniform buffer or immediates).
    launch: H,
    /// Uniform struct member of each scalar parameter.
    member: Vec<u32>,
    local_index: H,
    workgroup_id: H,
    subgroup: Option<(H, H)>,
    thread_id: Option<H>,
    program_id: [Option<H>; 3],
    num_programs: [Option<H>; 3],
    temps: u32,
}

impl<'a> Cx<'a> {
    fn new(k: &'a ThreadKernel, scan: &Scan, layout: &BindingLayout) -> Cx<'a> {
        let mut module = Module::default();
        let mut f = Function {
            name: Some(entry_name(&k.name)),
            ..Default::default()
        };
        let ty = |m: &mut Module, inner: TypeInner| m.types.insert(Type { name: None, inner }, SPAN);

        // Builtin arguments.
        let u32_ty = ty(&mut module, TypeInner::Scalar(Scalar::U32));
        let uvec3 = ty(
            &mut module,
            TypeInner::Vector {
                size: naga::VectorSize::Tri,
                scalar: Scalar::U32,
            },
        );
        let mut arg = |name: &str, ty, b: BuiltIn| {
            f.arguments.push(FunctionArgument {
                name: Some(name.into()),
                ty,
                binding: Some(Binding::BuiltIn(b)),
            });
            f.arguments.len() as u32 - 1
        };
        let li = arg("local_index", u32_ty, BuiltIn::LocalInvocationIndex);
        let wg = arg("workgroup_id", uvec3, BuiltIn::WorkGroupId);
        let sg = scan.shuffles.then(|| {
            (
                arg("subgroup_id", u32_ty, BuiltIn::SubgroupId),
                arg("subgroup_lane", u32_ty, BuiltIn::SubgroupInvocationId),
            )
        });
        let local_index = f.expressions.append(Expression::FunctionArgument(li), SPAN);
        let workgroup_id = f.expressions.append(Expression::FunctionArgument(wg), SPAN);
        let subgroup = sg.map(|(a, b)| {
            (
                f.expressions.append(Expression::FunctionArgument(a), SPAN),
                f.expressions.append(Expression::FunctionArgument(b), SPAN),
            )
        });

        // Storage buffers.
        let mut buffers = Vec::new();
        for (i, p) in k.params.iter().enumerate() {
            let ThreadParam::Ptr { name, elem } = p else {
                buffers.push(None);
                continue;
            };
            let holding = match (scan.atomic[i], elem) {
                (false, _) if scan.vec4[i] && elem.size_bytes() == 4 && *elem != ScalarType::Bool => Holding::Vec4,
                (false, _) => Holding::Plain,
                (true, ScalarType::F32) => Holding::AtomicF32Bits,
                (true, _) => Holding::Atomic,
            };
            let scalar = naga_scalar(*elem);
            let (elem_ty, stride) = match holding {
                Holding::Plain => (ty(&mut module, TypeInner::Scalar(scalar)), elem.size_bytes() as u32),
                Holding::Vec4 => (
                    ty(
                        &mut module,
                        TypeInner::Vector {
                            size: naga::VectorSize::Quad,
                            scalar,
                        },
                    ),
                    16,
                ),
                Holding::Atomic => (ty(&mut module, TypeInner::Atomic(scalar)), 4),
                Holding::AtomicF32Bits => (ty(&mut module, TypeInner::Atomic(Scalar::U32)), 4),
            };
            let arr = ty(
                &mut module,
                TypeInner::Array {
                    base: elem_ty,
                    size: naga::ArraySize::Dynamic,
                    stride,
                },
            );
            let binding = layout
                .storage
                .iter()
                .find(|s| s.param == i as u32)
                .expect("a binding per pointer")
                .binding;
            let gv = module.global_variables.append(
                GlobalVariable {
                    name: Some(name.clone()),
                    space: AddressSpace::Storage {
                        access: naga::StorageAccess::LOAD | naga::StorageAccess::STORE,
                    },
                    binding: Some(ResourceBinding { group: 0, binding }),
                    ty: arr,
                    init: None,
                    memory_decorations: naga::MemoryDecorations::empty(),
                },
                SPAN,
            );
            let ptr = f.expressions.append(Expression::GlobalVariable(gv), SPAN);
            buffers.push(Some(Buffer { ptr, holding, elem_ty }));
        }

        // The launch block.
        let mut members = vec![
            StructMember {
                name: Some("num_programs".into()),
                ty: uvec3,
                binding: None,
                offset: crate::NUM_PROGRAMS_OFFSET,
            },
            StructMember {
                name: Some("program_offset".into()),
                ty: uvec3,
                binding: None,
                offset: crate::PROGRAM_OFFSET_OFFSET,
            },
        ];
        let mut member = vec![u32::MAX; k.params.len()];
        for slot in &layout.scalars {
            let scalar = if slot.ty == ScalarType::Bool {
                Scalar::U32
            } else {
                naga_scalar(slot.ty)
            };
            member[slot.param as usize] = members.len() as u32;
            members.push(StructMember {
                name: Some(slot.name.clone()),
                ty: ty(&mut module, TypeInner::Scalar(scalar)),
                binding: None,
                offset: slot.offset,
            });
        }
        let st = module.types.insert(
            Type {
                name: Some("Launch".into()),
                inner: TypeInner::Struct {
                    members,
                    span: layout.launch_size,
                },
            },
            SPAN,
        );
        let (space, binding) = match layout.launch {
            crate::LaunchPlace::Uniform { binding } => {
                (AddressSpace::Uniform, Some(ResourceBinding { group: 0, binding }))
            }
            crate::LaunchPlace::Immediates => (AddressSpace::Immediate, None),
        };
        let gv = module.global_variables.append(
            GlobalVariable {
                name: Some("launch".into()),
                space,
                binding,
                ty: st,
                init: None,
                memory_decorations: naga::MemoryDecorations::empty(),
            },
            SPAN,
        );
        let launch = f.expressions.append(Expression::GlobalVariable(gv), SPAN);

        // Shared memory.
        let mut shared = Vec::new();
        for (i, a) in k.shared.iter().enumerate() {
            let elem_ty = ty(&mut module, TypeInner::Scalar(naga_scalar(a.elem)));
            let arr = ty(
                &mut module,
                TypeInner::Array {
                    base: elem_ty,
                    size: naga::ArraySize::Constant(std::num::NonZeroU32::new(a.len).expect("verified non-empty")),
                    stride: a.elem.size_bytes() as u32,
                },
            );
            let gv = module.global_variables.append(
                GlobalVariable {
                    name: Some(format!("shared{i}")),
                    space: AddressSpace::WorkGroup,
                    binding: None,
                    ty: arr,
                    init: None,
                    memory_decorations: naga::MemoryDecorations::empty(),
                },
                SPAN,
            );
            shared.push(f.expressions.append(Expression::GlobalVariable(gv), SPAN));
        }

        // Every register type is in the module, even where no variable has it, so that the
        // WGSL writer sees what to `enable` (f16).
        for (_, d) in k.regs.iter() {
            ty(&mut module, TypeInner::Scalar(naga_scalar(d.ty)));
        }
        let n = k.regs.len();
        Cx {
            k,
            module,
            f,
            block: Block::new(),
            emit_start: None,
            value_reg: scan.value_reg.clone(),
            local: vec![None; n],
            value: vec![None; n],
            buffers,
            param_value: vec![None; k.params.len()],
            shared,
            launch,
            member,
            local_index,
            workgroup_id,
            subgroup,
            thread_id: None,
            program_id: [None; 3],
            num_programs: [None; 3],
            temps: 0,
        }
    }

    fn finish(mut self, entry_point: &str) -> Module {
        self.flush();
        self.f.body = std::mem::take(&mut self.block);
        let threads = self.k.threads();
        self.module.entry_points.push(EntryPoint {
            name: entry_point.to_string(),
            stage: naga::ShaderStage::Compute,
            early_depth_test: None,
            workgroup_size: [threads, 1, 1],
            workgroup_size_overrides: None,
            function: self.f,
            mesh_info: None,
            task_payload: None,
            incoming_ray_payload: None,
        });
        self.module
    }

    // ---- Building blocks --------------------------------------------------------------

    fn ty(&mut self, inner: TypeInner) -> Handle<Type> {
        self.module.types.insert(Type { name: None, inner }, SPAN)
    }

    fn scalar_ty(&mut self, t: ScalarType) -> Handle<Type> {
        self.ty(TypeInner::Scalar(naga_scalar(t)))
    }

    /// Appends an expression, inside the pending `Emit` range unless it needs none.
    fn e(&mut self, e: Expression) -> H {
        if e.needs_pre_emit() {
            self.flush();
        } else if self.emit_start.is_none() {
            self.emit_start = Some(self.f.expressions.len());
        }
        self.f.expressions.append(e, SPAN)
    }

    /// Closes the pending `Emit` range.
    fn flush(&mut self) {
        if let Some(start) = self.emit_start.take() {
            let range = self.f.expressions.range_from(start);
            self.block.push(Statement::Emit(range), SPAN);
        }
    }

    /// An expression that a following statement defines (atomic and subgroup results).
    fn result(&mut self, e: Expression) -> H {
        self.flush();
        self.f.expressions.append(e, SPAN)
    }

    fn stmt(&mut self, s: Statement) {
        self.flush();
        self.block.push(s, SPAN);
    }

    /// Builds a nested block with `f`.
    fn nested(&mut self, f: impl FnOnce(&mut Self) -> R<()>) -> R<Block> {
        self.flush();
        let outer = std::mem::take(&mut self.block);
        let r = f(self);
        self.flush();
        let inner = std::mem::replace(&mut self.block, outer);
        r.map(|_| inner)
    }

    fn lit(&mut self, l: naga::Literal) -> H {
        self.e(Expression::Literal(l))
    }

    /// A literal, where a non-finite float becomes a bit pattern converted at run time.
    fn any_lit(&mut self, l: naga::Literal) -> H {
        match l {
            naga::Literal::F32(v) if !v.is_finite() => self.float_lit(ScalarType::F32, v as f64),
            naga::Literal::F64(v) if !v.is_finite() => self.float_lit(ScalarType::F64, v),
            l => self.lit(l),
        }
    }

    fn u32c(&mut self, v: u32) -> H {
        self.lit(naga::Literal::U32(v))
    }

    fn int_lit(&mut self, t: ScalarType, v: i64) -> H {
        self.lit(match t {
            ScalarType::Bool => naga::Literal::Bool(v != 0),
            ScalarType::I32 | ScalarType::I8 | ScalarType::I16 => naga::Literal::I32(v as i32),
            ScalarType::U32 | ScalarType::U8 | ScalarType::U16 => naga::Literal::U32(v as u32),
            ScalarType::I64 => naga::Literal::I64(v),
            ScalarType::U64 => naga::Literal::U64(v as u64),
            ScalarType::F16 => naga::Literal::F16(half::f16::from_f64(v as f64)),
            ScalarType::F32 => naga::Literal::F32(v as f32),
            ScalarType::F64 => naga::Literal::F64(v as f64),
            other => unreachable!("{other} literal"),
        })
    }

    /// A float constant of type `t`; infinities and NaNs (which naga literals cannot hold) are
    /// bit patterns converted at run time.
    fn float_lit(&mut self, t: ScalarType, v: f64) -> H {
        let l = match t {
            ScalarType::F16 => {
                let h = half::f16::from_f64(v);
                h.is_finite().then_some(naga::Literal::F16(h))
            }
            ScalarType::F32 => (v as f32).is_finite().then_some(naga::Literal::F32(v as f32)),
            ScalarType::F64 => v.is_finite().then_some(naga::Literal::F64(v)),
            other => unreachable!("{other} float literal"),
        };
        if let Some(l) = l {
            return self.lit(l);
        }
        let bits = self.u32c((v as f32).to_bits());
        let x = self.as_(bits, ScalarKind::Float, None);
        if t == ScalarType::F32 {
            x
        } else {
            self.as_(x, ScalarKind::Float, Some(t.size_bytes() as u8))
        }
    }

    fn zero(&mut self, t: ScalarType) -> H {
        self.int_lit(t, 0)
    }

    fn literal_of(&self, h: H) -> Option<naga::Literal> {
        match self.f.expressions[h] {
            Expression::Literal(l) => Some(l),
            _ => None,
        }
    }

    // Operations on literals only are folded here: naga's WGSL reader evaluates them and
    // rejects what overflows (e.g. `i32(-2147483648) / -1i`), where the IR wraps.

    fn bin(&mut self, op: Bo, left: H, right: H) -> H {
        if let (Some(a), Some(b)) = (self.literal_of(left), self.literal_of(right)) {
            if let Some(l) = fold_binary(op, a, b) {
                return self.any_lit(l);
            }
        }
        self.e(Expression::Binary { op, left, right })
    }

    fn un(&mut self, op: Uo, expr: H) -> H {
        if let Some(a) = self.literal_of(expr) {
            if let Some(l) = fold_unary(op, a) {
                return self.lit(l);
            }
        }
        self.e(Expression::Unary { op, expr })
    }

    fn select(&mut self, condition: H, accept: H, reject: H) -> H {
        if let Some(naga::Literal::Bool(c)) = self.literal_of(condition) {
            return if c { accept } else { reject };
        }
        self.e(Expression::Select {
            condition,
            accept,
            reject,
        })
    }

    fn math(&mut self, fun: Mf, args: &[H]) -> H {
        use naga::Literal as L;
        if let [a] = *args {
            match (fun, self.literal_of(a)) {
                (Mf::Abs, Some(L::I32(v))) => return self.lit(L::I32(v.wrapping_abs())),
                (Mf::Abs, Some(L::I64(v))) => return self.lit(L::I64(v.wrapping_abs())),
                _ => {}
            }
        }
        self.e(Expression::Math {
            fun,
            arg: args[0],
            arg1: args.get(1).copied(),
            arg2: args.get(2).copied(),
            arg3: None,
        })
    }

    fn as_(&mut self, expr: H, kind: ScalarKind, convert: Option<u8>) -> H {
        if let Expression::Literal(l) = self.f.expressions[expr] {
            if let Some(folded) = fold_as(l, kind, convert) {
                return self.lit(folded);
            }
        }
        self.e(Expression::As { expr, kind, convert })
    }

    fn load(&mut self, pointer: H) -> H {
        self.e(Expression::Load { pointer })
    }

    fn index(&mut self, base: H, index: u32) -> H {
        self.e(Expression::AccessIndex { base, index })
    }

    // ---- Registers --------------------------------------------------------------------

    fn local_ptr(&mut self, r: Reg) -> H {
        if let Some(p) = self.local[r.index()] {
            return p;
        }
        let t = self.k.reg_type(r);
        let ty = self.scalar_ty(t);
        // Zero-initialized, so that a register read before any write is deterministic.
        let init = self.e(Expression::Literal(zero_literal(t)));
        let var = self.f.local_variables.append(
            LocalVariable {
                name: Some(format!("r{}", r.index())),
                ty,
                init: Some(init),
            },
            SPAN,
        );
        let p = self.e(Expression::LocalVariable(var));
        self.local[r.index()] = Some(p);
        p
    }

    fn read(&mut self, r: Reg) -> H {
        if let Some(v) = self.value[r.index()] {
            return v;
        }
        let p = self.local_ptr(r);
        self.load(p)
    }

    fn write(&mut self, r: Reg, v: H) {
        if self.value_reg[r.index()] {
            if !self.f.expressions[v].needs_pre_emit() && !self.f.named_expressions.contains_key(&v) {
                self.f.named_expressions.insert(v, format!("r{}", r.index()));
            }
            self.value[r.index()] = Some(v);
        } else {
            let pointer = self.local_ptr(r);
            self.stmt(Statement::Store { pointer, value: v });
        }
    }

    fn new_temp(&mut self, t: ScalarType, prefix: &str) -> H {
        let ty = self.scalar_ty(t);
        self.temps += 1;
        let var = self.f.local_variables.append(
            LocalVariable {
                name: Some(format!("{prefix}{}", self.temps)),
                ty,
                init: None,
            },
            SPAN,
        );
        self.e(Expression::LocalVariable(var))
    }

    // ---- Launch values ----------------------------------------------------------------

    fn preamble(&mut self, scan: &Scan) {
        if scan.thread_id {
            let id = match self.subgroup {
                // Lane numbers must agree with the subgroup's: see the crate docs.
                Some((sg, lane)) => {
                    let ws = self.u32c(self.k.warp_size);
                    let base = self.bin(Bo::Multiply, sg, ws);
                    self.bin(Bo::Add, base, lane)
                }
                None => self.local_index,
            };
            let id = self.as_(id, ScalarKind::Sint, None);
            self.f.named_expressions.insert(id, "thread_id".into());
            self.thread_id = Some(id);
        }
        for a in 0..3 {
            if scan.program_id[a] {
                let w = self.index(self.workgroup_id, a as u32);
                let offp = self.index(self.launch, 1);
                let offp = self.index(offp, a as u32);
                let off = self.load(offp);
                let sum = self.bin(Bo::Add, w, off);
                let id = self.as_(sum, ScalarKind::Sint, None);
                self.f.named_expressions.insert(id, format!("program_id_{a}"));
                self.program_id[a] = Some(id);
            }
            if scan.num_programs[a] {
                let p = self.index(self.launch, 0);
                let p = self.index(p, a as u32);
                let n = self.load(p);
                let n = self.as_(n, ScalarKind::Sint, None);
                self.f.named_expressions.insert(n, format!("num_programs_{a}"));
                self.num_programs[a] = Some(n);
            }
        }
        for (i, used) in scan.params_used.iter().enumerate() {
            let ThreadParam::Scalar { name, ty } = &self.k.params[i] else {
                continue;
            };
            if !used {
                continue;
            }
            let p = self.index(self.launch, self.member[i]);
            let mut v = self.load(p);
            if *ty == ScalarType::Bool {
                let z = self.u32c(0);
                v = self.bin(Bo::NotEqual, v, z);
            }
            self.f.named_expressions.insert(v, format!("param_{}", sanitize(name)));
            self.param_value[i] = Some(v);
        }
    }

    // ---- Statements -------------------------------------------------------------------

    fn stmts(&mut self, stmts: &[Stmt]) -> R<()> {
        for s in stmts {
            self.statement(s)?;
        }
        Ok(())
    }

    /// Runs `f` where `pred` holds (always when `None`).
    fn predicated(&mut self, pred: Option<Reg>, f: impl FnOnce(&mut Self) -> R<()>) -> R<()> {
        match pred {
            None => f(self),
            Some(p) => {
                let condition = self.read(p);
                let accept = self.nested(f)?;
                self.stmt(Statement::If {
                    condition,
                    accept,
                    reject: Block::new(),
                });
                Ok(())
            }
        }
    }

    fn statement(&mut self, s: &Stmt) -> R<()> {
        match s {
            Stmt::Set { dst, expr } => {
                let v = self.expr(self.k.reg_type(*dst), expr)?;
                self.write(*dst, v);
            }
            // The cache modifier is a hint naga cannot express (SPIR-V's `Nontemporal`
            // memory operand): `crate::hints` adds it to the words naga writes.
            Stmt::Load {
                dsts, mem, index, pred, ..
            } => self.predicated(*pred, |cx| {
                let base = cx.index_u32(*index);
                if cx.holding(*mem) == Holding::Vec4 && dsts.len() % 4 == 0 {
                    // Whole 16-byte vectors (the index is aligned: see `Stmt::Load`).
                    for (c, chunk) in dsts.chunks(4).enumerate() {
                        let p = cx.vector_at(*mem, base, c as u32);
                        let v = cx.load(p);
                        for (j, &d) in chunk.iter().enumerate() {
                            let x = cx.index(v, j as u32);
                            cx.write(d, x);
                        }
                    }
                    return Ok(());
                }
                for (i, &d) in dsts.iter().enumerate() {
                    let p = cx.element(*mem, base, i as u32);
                    let mut v = cx.load(p);
                    if cx.holding(*mem) == Holding::AtomicF32Bits {
                        v = cx.as_(v, ScalarKind::Float, None);
                    }
                    cx.write(d, v);
                }
                Ok(())
            })?,
            Stmt::Store {
                values,
                mem,
                index,
                pred,
            } => self.predicated(*pred, |cx| {
                let base = cx.index_u32(*index);
                if cx.holding(*mem) == Holding::Vec4 && values.len() % 4 == 0 {
                    for (c, chunk) in values.chunks(4).enumerate() {
                        let components: Vec<H> = chunk.iter().map(|&r| cx.read(r)).collect();
                        let ty = cx.buffer(*mem).elem_ty;
                        let value = cx.e(Expression::Compose { ty, components });
                        let pointer = cx.vector_at(*mem, base, c as u32);
                        cx.stmt(Statement::Store { pointer, value });
                    }
                    return Ok(());
                }
                for (i, &r) in values.iter().enumerate() {
                    let mut value = cx.read(r);
                    if cx.holding(*mem) == Holding::AtomicF32Bits {
                        value = cx.as_(value, ScalarKind::Uint, None);
                    }
                    let pointer = cx.element(*mem, base, i as u32);
                    cx.stmt(Statement::Store { pointer, value });
                }
                Ok(())
            })?,
            Stmt::Atomic {
                dst,
                op,
                param,
                index,
                value,
                pred,
            } => self.predicated(*pred, |cx| cx.atomic(*dst, *op, *param, *index, *value))?,
            Stmt::AtomicCas {
                dst,
                param,
                index,
                cmp,
                value,
                pred,
            } => self.predicated(*pred, |cx| cx.atomic_cas(*dst, *param, *index, *cmp, *value))?,
            Stmt::Barrier => self.stmt(Statement::ControlBarrier(naga::Barrier::WORK_GROUP)),
            Stmt::If {
                cond,
                then_body,
                else_body,
            } => {
                let condition = self.read(*cond);
                let accept = self.nested(|cx| cx.stmts(then_body))?;
                let reject = self.nested(|cx| cx.stmts(else_body))?;
                self.stmt(Statement::If {
                    condition,
                    accept,
                    reject,
                });
            }
            Stmt::While { cond_body, cond, body } => {
                let body = self.nested(|cx| {
                    cx.stmts(cond_body)?;
                    let condition = cx.read(*cond);
                    let mut reject = Block::new();
                    reject.push(Statement::Break, SPAN);
                    cx.stmt(Statement::If {
                        condition,
                        accept: Block::new(),
                        reject,
                    });
                    cx.stmts(body)
                })?;
                self.stmt(Statement::Loop {
                    body,
                    continuing: Block::new(),
                    break_if: None,
                });
            }
            Stmt::Comment(_) => {}
        }
        Ok(())
    }

    /// An element index register as `u32` (buffers hold fewer than 2^32 elements).
    fn index_u32(&mut self, r: Reg) -> H {
        let v = self.read(r);
        match self.k.reg_type(r) {
            ScalarType::U32 => v,
            ScalarType::I32 => self.as_(v, ScalarKind::Uint, None),
            ScalarType::U64 => self.as_(v, ScalarKind::Uint, Some(4)),
            ScalarType::I64 => {
                let t = self.as_(v, ScalarKind::Sint, Some(4));
                self.as_(t, ScalarKind::Uint, None)
            }
            t => unreachable!("verified index type {t}"),
        }
    }

    /// The storage buffer of a global access.
    fn buffer(&self, mem: Memory) -> &Buffer {
        let Memory::Global { param } = mem else {
            unreachable!("shared memory is not a storage buffer")
        };
        self.buffers[param as usize].as_ref().expect("verified pointer")
    }

    fn holding(&self, mem: Memory) -> Holding {
        match mem {
            Memory::Global { .. } => self.buffer(mem).holding,
            Memory::Shared { .. } => Holding::Plain,
        }
    }

    /// A pointer to element `base + offset` of `mem`.
    fn element(&mut self, mem: Memory, base: H, offset: u32) -> H {
        let index = if offset == 0 {
            base
        } else {
            let o = self.u32c(offset);
            self.bin(Bo::Add, base, o)
        };
        let buf = match mem {
            Memory::Global { .. } => self.buffer(mem).ptr,
            Memory::Shared { alloc } => self.shared[alloc as usize],
        };
        if self.holding(mem) == Holding::Vec4 {
            let (two, three) = (self.u32c(2), self.u32c(3));
            let vector = self.bin(Bo::ShiftRight, index, two);
            let lane = self.bin(Bo::And, index, three);
            let v = self.e(Expression::Access {
                base: buf,
                index: vector,
            });
            return self.e(Expression::Access { base: v, index: lane });
        }
        self.e(Expression::Access { base: buf, index })
    }

    /// A pointer to the `chunk`-th whole vector from element `base` (a multiple of 4) of a
    /// [`Holding::Vec4`] buffer.
    fn vector_at(&mut self, mem: Memory, base: H, chunk: u32) -> H {
        let buf = self.buffer(mem).ptr;
        let two = self.u32c(2);
        let mut vector = self.bin(Bo::ShiftRight, base, two);
        if chunk > 0 {
            let c = self.u32c(chunk);
            vector = self.bin(Bo::Add, vector, c);
        }
        self.e(Expression::Access {
            base: buf,
            index: vector,
        })
    }

    fn atomic(&mut self, dst: Reg, op: AtomicOp, param: u32, index: Reg, value: Reg) -> R<()> {
        let mem = Memory::Global { param };
        let base = self.index_u32(index);
        let pointer = self.element(mem, base, 0);
        let v = self.read(value);
        let ty = self.k.reg_type(value);
        if self.holding(mem) == Holding::AtomicF32Bits {
            let old = match op {
                AtomicOp::Xchg => {
                    let bits = self.as_(v, ScalarKind::Uint, None);
                    let ty = self.scalar_ty(ScalarType::U32);
                    let result = self.result(Expression::AtomicResult { ty, comparison: false });
                    self.stmt(Statement::Atomic {
                        pointer,
                        fun: AtomicFunction::Exchange { compare: None },
                        value: bits,
                        result: Some(result),
                    });
                    result
                }
                AtomicOp::Add | AtomicOp::Min | AtomicOp::Max => self.f32_cas_loop(pointer, op, v)?,
                _ => unreachable!("rejected by the scan"),
            };
            let old = self.as_(old, ScalarKind::Float, None);
            self.write(dst, old);
            return Ok(());
        }
        let fun = match op {
            AtomicOp::Add => AtomicFunction::Add,
            AtomicOp::Max => AtomicFunction::Max,
            AtomicOp::Min => AtomicFunction::Min,
            AtomicOp::Xchg => AtomicFunction::Exchange { compare: None },
            AtomicOp::And => AtomicFunction::And,
            AtomicOp::Or => AtomicFunction::InclusiveOr,
            AtomicOp::Xor => AtomicFunction::ExclusiveOr,
        };
        let rty = self.scalar_ty(ty);
        let result = self.result(Expression::AtomicResult {
            ty: rty,
            comparison: false,
        });
        self.stmt(Statement::Atomic {
            pointer,
            fun,
            value: v,
            result: Some(result),
        });
        self.write(dst, result);
        Ok(())
    }

    /// `op` on the `f32` whose bits `pointer` (an `atomic<u32>`) holds, by compare-and-swap;
    /// the old bits.
    fn f32_cas_loop(&mut self, pointer: H, op: AtomicOp, v: H) -> R<H> {
        let old_var = self.new_temp(ScalarType::U32, "cas_old");
        let first = self.load(pointer);
        self.stmt(Statement::Store {
            pointer: old_var,
            value: first,
        });
        let cas_ty = self
            .module
            .generate_predeclared_type(naga::PredeclaredType::AtomicCompareExchangeWeakResult(Scalar::U32));
        let body = self.nested(|cx| {
            let old = cx.load(old_var);
            let oldf = cx.as_(old, ScalarKind::Float, None);
            let newf = match op {
                AtomicOp::Add => cx.bin(Bo::Add, oldf, v),
                AtomicOp::Min => cx.fminmax(true, ScalarType::F32, oldf, v),
                AtomicOp::Max => cx.fminmax(false, ScalarType::F32, oldf, v),
                _ => unreachable!(),
            };
            let new = cx.as_(newf, ScalarKind::Uint, None);
            let (_, exchanged) = cx.compare_exchange(cas_ty, pointer, old, new, old_var);
            cx.break_if(exchanged);
            Ok(())
        })?;
        self.stmt(Statement::Loop {
            body,
            continuing: Block::new(),
            break_if: None,
        });
        Ok(self.load(old_var))
    }

    /// One weak compare-exchange of `pointer` (`compare` → `value`): stores the value seen into
    /// `seen_var` and returns (seen, exchanged).
    fn compare_exchange(
        &mut self,
        cas_ty: naga::Handle<naga::Type>,
        pointer: H,
        compare: H,
        value: H,
        seen_var: H,
    ) -> (H, H) {
        let result = self.result(Expression::AtomicResult {
            ty: cas_ty,
            comparison: true,
        });
        self.stmt(Statement::Atomic {
            pointer,
            fun: AtomicFunction::Exchange { compare: Some(compare) },
            value,
            result: Some(result),
        });
        let seen = self.index(result, 0);
        let exchanged = self.index(result, 1);
        self.stmt(Statement::Store {
            pointer: seen_var,
            value: seen,
        });
        (seen, exchanged)
    }

    /// Leaves the enclosing loop when `condition` holds.
    fn break_if(&mut self, condition: H) {
        let mut accept = Block::new();
        accept.push(Statement::Break, SPAN);
        self.stmt(Statement::If {
            condition,
            accept,
            reject: Block::new(),
        });
    }

    fn atomic_cas(&mut self, dst: Reg, param: u32, index: Reg, cmp: Reg, value: Reg) -> R<()> {
        let mem = Memory::Global { param };
        let base = self.index_u32(index);
        let pointer = self.element(mem, base, 0);
        let mut c = self.read(cmp);
        let mut v = self.read(value);
        let bits = self.holding(mem) == Holding::AtomicF32Bits;
        let ty = if bits { ScalarType::U32 } else { self.k.reg_type(value) };
        if bits {
            c = self.as_(c, ScalarKind::Uint, None);
            v = self.as_(v, ScalarKind::Uint, None);
        }
        let cas_ty = self
            .module
            .generate_predeclared_type(naga::PredeclaredType::AtomicCompareExchangeWeakResult(naga_scalar(ty)));
        // A weak compare-exchange may fail spuriously: retry while it failed although the
        // value matched, which makes it the strong operation of the IR.
        let old_var = self.new_temp(ty, "cas_old");
        let body = self.nested(|cx| {
            let (seen, exchanged) = cx.compare_exchange(cas_ty, pointer, c, v, old_var);
            let differs = cx.bin(Bo::NotEqual, seen, c);
            let done = cx.bin(Bo::LogicalOr, exchanged, differs);
            cx.break_if(done);
            Ok(())
        })?;
        self.stmt(Statement::Loop {
            body,
            continuing: Block::new(),
            break_if: None,
        });
        let mut old = self.load(old_var);
        if bits {
            old = self.as_(old, ScalarKind::Float, None);
        }
        self.write(dst, old);
        Ok(())
    }

    // ---- Expressions ------------------------------------------------------------------

    fn expr(&mut self, ty: ScalarType, e: &Expr) -> R<H> {
        Ok(match e {
            Expr::Const(l) => match *l {
                Literal::Bool(b) => self.lit(naga::Literal::Bool(b)),
                Literal::Int(v) => self.int_lit(ty, v),
                Literal::Float(v) => self.float_lit(ty, v),
            },
            Expr::Param(i) => self.param_value[*i as usize].expect("scanned parameter"),
            Expr::Special(Special::ThreadId) => self.thread_id.expect("scanned thread id"),
            Expr::Special(Special::ProgramId(a)) => self.program_id[*a as usize % 3].expect("scanned program id"),
            Expr::Special(Special::NumPrograms(a)) => self.num_programs[*a as usize % 3].expect("scanned grid size"),
            Expr::Copy(a) => self.read(*a),
            Expr::Unary(op, a) => {
                let x = self.read(*a);
                let r = self.unary(*op, ty, x)?;
                match op {
                    UnaryOp::Neg | UnaryOp::Abs | UnaryOp::Not => self.narrow(ty, r),
                    _ => r,
                }
            }
            Expr::Binary(op, a, b) => {
                let x = self.read(*a);
                let y = self.read(*b);
                let r = self.binary(*op, ty, x, y)?;
                match op {
                    BinaryOp::Add
                    | BinaryOp::Sub
                    | BinaryOp::Mul
                    | BinaryOp::Div
                    | BinaryOp::CeilDiv
                    | BinaryOp::Shl => self.narrow(ty, r),
                    _ => r,
                }
            }
            Expr::Compare(op, a, b) => {
                let t = self.k.reg_type(*a);
                let x = self.read(*a);
                let y = self.read(*b);
                self.compare(*op, t, x, y)
            }
            Expr::Select(c, a, b) => {
                let c = self.read(*c);
                let x = self.read(*a);
                let y = self.read(*b);
                self.select(c, x, y)
            }
            Expr::Fma(a, b, c) => {
                let x = self.read(*a);
                let y = self.read(*b);
                let z = self.read(*c);
                self.math(Mf::Fma, &[x, y, z])
            }
            Expr::Cast(a) => {
                let src = self.k.reg_type(*a);
                let x = self.read(*a);
                self.cast(src, ty, x)
            }
            Expr::Bitcast(a) => {
                let src = self.k.reg_type(*a);
                let x = self.read(*a);
                if src == ty {
                    x
                } else if (src == ScalarType::F16) != (ty == ScalarType::F16) && src.bits() == 16 {
                    return Err(unsupported(
                        self.k,
                        "bitcast",
                        format!("bitcast between {src} and {ty}: 16-bit integers live in 32 bits here"),
                    ));
                } else {
                    let v = self.as_(x, naga_scalar(ty).kind, None);
                    self.narrow(ty, v)
                }
            }
            Expr::ShuffleXor { value, mask } => {
                let x = self.read(*value);
                let m = self.u32c(*mask);
                self.shuffle(ty, x, GatherMode::ShuffleXor(m))
            }
            Expr::ShuffleIdx { value, lane } => {
                let x = self.read(*value);
                let l = self.read(*lane);
                let l = self.as_(l, ScalarKind::Uint, None);
                self.shuffle(ty, x, GatherMode::Shuffle(l))
            }
        })
    }

    fn shuffle(&mut self, ty: ScalarType, x: H, mode: GatherMode) -> H {
        if ty == ScalarType::Bool {
            // Subgroup gathers take numbers only.
            let one = self.u32c(1);
            let zero = self.u32c(0);
            let n = self.select(x, one, zero);
            let r = self.shuffle(ScalarType::U32, n, mode);
            let zero = self.u32c(0);
            return self.bin(Bo::NotEqual, r, zero);
        }
        let rty = self.scalar_ty(ty);
        let result = self.result(Expression::SubgroupOperationResult { ty: rty });
        self.stmt(Statement::SubgroupGather {
            mode,
            argument: x,
            result,
        });
        result
    }

    fn unary(&mut self, op: UnaryOp, ty: ScalarType, x: H) -> R<H> {
        let float = ty.is_float();
        Ok(match op {
            UnaryOp::Neg if ty.is_unsigned_int() => {
                let z = self.zero(ty);
                self.bin(Bo::Subtract, z, x)
            }
            UnaryOp::Neg if ty != ScalarType::Bool => self.un(Uo::Negate, x),
            UnaryOp::Not if ty == ScalarType::Bool => self.un(Uo::LogicalNot, x),
            UnaryOp::Not if ty.is_int() => self.un(Uo::BitwiseNot, x),
            UnaryOp::Abs if ty.is_unsigned_int() => x,
            UnaryOp::Abs if ty != ScalarType::Bool => self.math(Mf::Abs, &[x]),
            UnaryOp::Exp if float => self.transcendental(Mf::Exp, ty, x),
            UnaryOp::Exp2 if float => self.transcendental(Mf::Exp2, ty, x),
            UnaryOp::Log if float => self.transcendental(Mf::Log, ty, x),
            UnaryOp::Log2 if float => self.transcendental(Mf::Log2, ty, x),
            UnaryOp::Sqrt if float => self.math(Mf::Sqrt, &[x]),
            UnaryOp::Rsqrt if float => self.math(Mf::InverseSqrt, &[x]),
            UnaryOp::Sin if float => self.transcendental(Mf::Sin, ty, x),
            UnaryOp::Cos if float => self.transcendental(Mf::Cos, ty, x),
            UnaryOp::Floor if float => self.math(Mf::Floor, &[x]),
            UnaryOp::Ceil if float => self.math(Mf::Ceil, &[x]),
            UnaryOp::Erf if float => self.erf(ty, x),
            UnaryOp::Sigmoid if float => {
                let n = self.un(Uo::Negate, x);
                let e = self.transcendental(Mf::Exp, ty, n);
                let one = self.float_lit(ty, 1.0);
                let d = self.bin(Bo::Add, one, e);
                let one = self.float_lit(ty, 1.0);
                self.bin(Bo::Divide, one, d)
            }
            _ => return Err(invalid(self.k, format!("{} of {ty}", op.name()))),
        })
    }

    /// `exp`, `log`, `sin`, ...: GLSL.std.450 has them for 16- and 32-bit floats only, so
    /// `f64` goes through `f32`.
    fn transcendental(&mut self, fun: Mf, ty: ScalarType, x: H) -> H {
        if ty != ScalarType::F64 {
            return self.math(fun, &[x]);
        }
        let x = self.as_f32(ty, x);
        let r = self.math(fun, &[x]);
        self.as_(r, ScalarKind::Float, Some(8))
    }

    fn binary(&mut self, op: BinaryOp, ty: ScalarType, x: H, y: H) -> R<H> {
        if ty == ScalarType::Bool {
            return Ok(match op {
                BinaryOp::And | BinaryOp::Min => self.bin(Bo::LogicalAnd, x, y),
                BinaryOp::Or | BinaryOp::Max => self.bin(Bo::LogicalOr, x, y),
                BinaryOp::Xor => self.bin(Bo::NotEqual, x, y),
                _ => return Err(invalid(self.k, format!("{} of i1", op.name()))),
            });
        }
        if ty.is_float() {
            return Ok(match op {
                BinaryOp::Add => self.bin(Bo::Add, x, y),
                BinaryOp::Sub => self.bin(Bo::Subtract, x, y),
                BinaryOp::Mul => self.bin(Bo::Multiply, x, y),
                BinaryOp::Div => self.bin(Bo::Divide, x, y),
                BinaryOp::Rem => self.bin(Bo::Modulo, x, y),
                BinaryOp::Min => self.fminmax(true, ty, x, y),
                BinaryOp::Max => self.fminmax(false, ty, x, y),
                _ => return Err(invalid(self.k, format!("{} of {ty}", op.name()))),
            });
        }
        Ok(match op {
            BinaryOp::Add => self.bin(Bo::Add, x, y),
            BinaryOp::Sub => self.bin(Bo::Subtract, x, y),
            BinaryOp::Mul => self.bin(Bo::Multiply, x, y),
            BinaryOp::Div => self.idiv(ty, x, y),
            // naga and WGSL define `x % 0` and `MIN % -1` as 0, as the IR does.
            BinaryOp::Rem => self.irem(ty, x, y),
            BinaryOp::CeilDiv => {
                let s = self.bin(Bo::Add, x, y);
                let one = self.int_lit(ty, 1);
                let s = self.bin(Bo::Subtract, s, one);
                let s = self.narrow(ty, s);
                self.idiv(ty, s, y)
            }
            BinaryOp::And => self.bin(Bo::And, x, y),
            BinaryOp::Or => self.bin(Bo::InclusiveOr, x, y),
            BinaryOp::Xor => self.bin(Bo::ExclusiveOr, x, y),
            BinaryOp::Shl | BinaryOp::Shr => self.shift(op == BinaryOp::Shl, ty, x, y),
            BinaryOp::Min => self.math(Mf::Min, &[x, y]),
            BinaryOp::Max => self.math(Mf::Max, &[x, y]),
        })
    }

    /// An 8- or 16-bit integer result brought back to its representation: the value of its
    /// type, sign- (signed) or zero-extended (unsigned) to 32 bits. Other types pass.
    fn narrow(&mut self, ty: ScalarType, x: H) -> H {
        if !is_narrow(ty) {
            return x;
        }
        let w = ty.bits();
        if ty.is_signed_int() {
            let s = self.u32c(32 - w);
            let up = self.bin(Bo::ShiftLeft, x, s);
            let s = self.u32c(32 - w);
            self.bin(Bo::ShiftRight, up, s)
        } else {
            let m = self.u32c((1u32 << w) - 1);
            self.bin(Bo::And, x, m)
        }
    }

    /// The value of an integer literal expression, as unsigned bits of its width.
    fn int_literal(&self, h: H) -> Option<u64> {
        match self.f.expressions[h] {
            Expression::Literal(naga::Literal::I32(v)) => Some(v as u32 as u64),
            Expression::Literal(naga::Literal::U32(v)) => Some(v as u64),
            Expression::Literal(naga::Literal::I64(v)) => Some(v as u64),
            Expression::Literal(naga::Literal::U64(v)) => Some(v),
            _ => None,
        }
    }

    /// Integer remainder; by a literal zero (which naga rejects), 0.
    fn irem(&mut self, ty: ScalarType, x: H, y: H) -> H {
        if self.int_literal(y) == Some(0) {
            return self.zero(ty);
        }
        self.bin(Bo::Modulo, x, y)
    }

    /// Integer division with `x / 0 = 0` (naga gives `x`) and `MIN / -1 = MIN`.
    fn idiv(&mut self, ty: ScalarType, x: H, y: H) -> H {
        match self.int_literal(y) {
            Some(0) => return self.zero(ty),
            Some(_) => return self.bin(Bo::Divide, x, y),
            None => {}
        }
        let q = self.bin(Bo::Divide, x, y);
        let z = self.zero(ty);
        let by_zero = self.bin(Bo::Equal, y, z);
        let z = self.zero(ty);
        self.select(by_zero, z, q)
    }

    /// Shifts where an amount at or above the width gives 0 (or the sign fill).
    fn shift(&mut self, left: bool, ty: ScalarType, x: H, amount: H) -> H {
        let width = ty.bits() as i64;
        if let Some(n) = self.int_literal(amount) {
            let sign_fill = !left && ty.is_signed_int();
            if n >= width as u64 && !sign_fill {
                return self.zero(ty);
            }
            let a = self.u32c(n.min(width as u64 - 1) as u32);
            return self.bin(if left { Bo::ShiftLeft } else { Bo::ShiftRight }, x, a);
        }
        let unsigned_ty = if ty.bits() == 64 {
            ScalarType::U64
        } else {
            ScalarType::U32
        };
        let a = if ty.is_signed_int() {
            self.as_(amount, ScalarKind::Uint, None)
        } else {
            amount
        };
        let w = self.int_lit(unsigned_ty, width);
        let too_far = self.bin(Bo::GreaterEqual, a, w);
        let mask = self.int_lit(unsigned_ty, width - 1);
        let mut a = self.bin(Bo::And, a, mask);
        if ty.bits() == 64 {
            a = self.as_(a, ScalarKind::Uint, Some(4));
        }
        if !left && ty.is_signed_int() {
            // Sign fill: shift by width - 1.
            let last = self.u32c(width as u32 - 1);
            let a = self.select(too_far, last, a);
            return self.bin(Bo::ShiftRight, x, a);
        }
        let shifted = self.bin(if left { Bo::ShiftLeft } else { Bo::ShiftRight }, x, a);
        let z = self.zero(ty);
        self.select(too_far, z, shifted)
    }

    /// `x` as `f32` (exactly for `f16`; NaN stays NaN and signs stay for `f64`).
    fn as_f32(&mut self, ty: ScalarType, x: H) -> H {
        if ty == ScalarType::F32 {
            x
        } else {
            self.as_(x, ScalarKind::Float, Some(4))
        }
    }

    /// Whether `x` is a NaN, from its bits (robust where the device assumes no NaNs).
    fn is_nan(&mut self, ty: ScalarType, x: H) -> H {
        let x = self.as_f32(ty, x);
        let bits = self.as_(x, ScalarKind::Uint, None);
        let m = self.u32c(0x7fff_ffff);
        let mag = self.bin(Bo::And, bits, m);
        let inf = self.u32c(0x7f80_0000);
        self.bin(Bo::Greater, mag, inf)
    }

    /// Whether the sign bit of `x` is set.
    fn sign_bit(&mut self, ty: ScalarType, x: H) -> H {
        let x = self.as_f32(ty, x);
        let bits = self.as_(x, ScalarKind::Sint, None);
        let z = self.lit(naga::Literal::I32(0));
        self.bin(Bo::Less, bits, z)
    }

    /// IEEE `minimum`/`maximum`: NaN if either is NaN; -0.0 below +0.0.
    fn fminmax(&mut self, min: bool, ty: ScalarType, x: H, y: H) -> H {
        let strictly = self.bin(if min { Bo::Less } else { Bo::Greater }, x, y);
        let eq = self.bin(Bo::Equal, x, y);
        let neg = self.sign_bit(ty, x);
        let tie = if min { neg } else { self.un(Uo::LogicalNot, neg) };
        let tie = self.bin(Bo::LogicalAnd, eq, tie);
        let take_x = self.bin(Bo::LogicalOr, strictly, tie);
        let r = self.select(take_x, x, y);
        let nx = self.is_nan(ty, x);
        let ny = self.is_nan(ty, y);
        let nan = self.bin(Bo::LogicalOr, nx, ny);
        let sum = self.bin(Bo::Add, x, y);
        self.select(nan, sum, r)
    }

    fn compare(&mut self, op: CmpOp, ty: ScalarType, x: H, y: H) -> H {
        if ty == ScalarType::Bool {
            return match op {
                CmpOp::Eq => self.bin(Bo::Equal, x, y),
                CmpOp::Ne => self.bin(Bo::NotEqual, x, y),
                // false < true.
                CmpOp::Lt | CmpOp::Le => {
                    let nx = self.un(Uo::LogicalNot, x);
                    self.bin(if op == CmpOp::Lt { Bo::LogicalAnd } else { Bo::LogicalOr }, nx, y)
                }
                CmpOp::Gt | CmpOp::Ge => {
                    let ny = self.un(Uo::LogicalNot, y);
                    self.bin(if op == CmpOp::Gt { Bo::LogicalAnd } else { Bo::LogicalOr }, x, ny)
                }
            };
        }
        match op {
            CmpOp::Eq => self.bin(Bo::Equal, x, y),
            // naga's float `!=` is ordered (false with a NaN); the IR's is not.
            CmpOp::Ne if ty.is_float() => {
                let eq = self.bin(Bo::Equal, x, y);
                self.un(Uo::LogicalNot, eq)
            }
            CmpOp::Ne => self.bin(Bo::NotEqual, x, y),
            CmpOp::Lt => self.bin(Bo::Less, x, y),
            CmpOp::Le => self.bin(Bo::LessEqual, x, y),
            CmpOp::Gt => self.bin(Bo::Greater, x, y),
            CmpOp::Ge => self.bin(Bo::GreaterEqual, x, y),
        }
    }

    fn cast(&mut self, src: ScalarType, dst: ScalarType, x: H) -> H {
        if src == dst {
            return x;
        }
        if src == ScalarType::Bool {
            let one = if dst.is_float() {
                self.float_lit(dst, 1.0)
            } else {
                self.int_lit(dst, 1)
            };
            let zero = self.zero(dst);
            return self.select(x, one, zero);
        }
        if dst == ScalarType::Bool {
            let z = self.zero(src);
            if src.is_float() {
                // NaN is true.
                let eq = self.bin(Bo::Equal, x, z);
                return self.un(Uo::LogicalNot, eq);
            }
            return self.bin(Bo::NotEqual, x, z);
        }
        let s = naga_scalar(src);
        let d = naga_scalar(dst);
        if src.is_int() && dst.is_int() {
            // Width first, in the source's signedness (sign- or zero-extension), then the kind.
            let mut v = x;
            if s.width != d.width {
                v = self.as_(v, s.kind, Some(d.width));
            }
            if s.kind != d.kind {
                v = self.as_(v, d.kind, None);
            }
            return self.narrow(dst, v);
        }
        if src.is_float() && is_narrow(dst) {
            // Through the 32-bit type of the same signedness, then clamped.
            let wide = if dst.is_signed_int() {
                ScalarType::I32
            } else {
                ScalarType::U32
            };
            let v = self.float_to_int(src, wide, x);
            let bits = dst.bits();
            let (lo, hi) = if dst.is_signed_int() {
                (-(1i64 << (bits - 1)), (1i64 << (bits - 1)) - 1)
            } else {
                (0, (1i64 << bits) - 1)
            };
            let h = self.int_lit(wide, hi);
            let v = self.math(Mf::Min, &[v, h]);
            if dst.is_signed_int() {
                let l = self.int_lit(wide, lo);
                return self.math(Mf::Max, &[v, l]);
            }
            return v;
        }
        if src.is_float() && dst.is_int() {
            return self.float_to_int(src, dst, x);
        }
        self.as_(x, d.kind, Some(d.width))
    }

    /// Truncation toward zero, saturating at the integer type's bounds, NaN to 0.
    fn float_to_int(&mut self, src: ScalarType, dst: ScalarType, x: H) -> H {
        let d = naga_scalar(dst);
        // naga clamps to the largest floats inside the range before converting.
        let conv = self.as_(x, d.kind, Some(d.width));
        let max_finite = match src {
            ScalarType::F16 => 65504.0,
            ScalarType::F32 => f32::MAX as f64,
            _ => f64::MAX,
        };
        let bits = dst.bits() as i32;
        let (hi, max_int, min_int) = if dst.is_signed_int() {
            (
                2f64.powi(bits - 1),
                if bits == 64 { i64::MAX } else { i32::MAX as i64 },
                if bits == 64 { i64::MIN } else { i32::MIN as i64 },
            )
        } else {
            (2f64.powi(bits), if bits == 64 { -1 } else { u32::MAX as i64 }, 0)
        };
        let over = if hi <= max_finite {
            let h = self.float_lit(src, hi);
            self.bin(Bo::GreaterEqual, x, h)
        } else {
            let m = self.float_lit(src, max_finite);
            self.bin(Bo::Greater, x, m)
        };
        let top = self.int_lit(dst, max_int);
        let mut r = self.select(over, top, conv);
        if dst.is_signed_int() && hi > max_finite {
            // The lowest integer is beyond the float's range: only -inf reaches it.
            let m = self.float_lit(src, -max_finite);
            let under = self.bin(Bo::Less, x, m);
            let bottom = self.int_lit(dst, min_int);
            r = self.select(under, bottom, r);
        }
        let nan = self.is_nan(src, x);
        let z = self.zero(dst);
        self.select(nan, z, r)
    }

    fn horner(&mut self, coeffs: &[f32], t: H) -> H {
        let last = *coeffs.last().expect("the callers' coefficient tables are not empty");
        let mut acc = self.lit(naga::Literal::F32(last));
        for &c in coeffs.iter().rev().skip(1) {
            let c = self.lit(naga::Literal::F32(c));
            acc = self.math(Mf::Fma, &[acc, t, c]);
        }
        acc
    }

    /// `erf` (see [`crate::erf`]); other float types go through `f32`.
    fn erf(&mut self, ty: ScalarType, x: H) -> H {
        let x = self.as_f32(ty, x);
        let ax = self.math(Mf::Abs, &[x]);
        let s = self.bin(Bo::Multiply, x, x);
        let p = self.horner(&erf::SMALL, s);
        let small = self.bin(Bo::Multiply, x, p);
        let four = self.lit(naga::Literal::F32(4.0));
        let xc = self.math(Mf::Min, &[ax, four]);
        let qm = self.horner(&erf::MID, xc);
        let qt = self.horner(&erf::TAIL, xc);
        let two = self.lit(naga::Literal::F32(2.0));
        let in_mid = self.bin(Bo::Less, xc, two);
        let q = self.select(in_mid, qm, qt);
        let sq = self.bin(Bo::Multiply, xc, xc);
        let nsq = self.un(Uo::Negate, sq);
        let e = self.math(Mf::Exp, &[nsq]);
        let ne = self.un(Uo::Negate, e);
        let one = self.lit(naga::Literal::F32(1.0));
        let tail = self.math(Mf::Fma, &[ne, q, one]);
        let zero = self.lit(naga::Literal::F32(0.0));
        let negative = self.bin(Bo::Less, x, zero);
        let ntail = self.un(Uo::Negate, tail);
        let big = self.select(negative, ntail, tail);
        let one = self.lit(naga::Literal::F32(1.0));
        let large = self.bin(Bo::GreaterEqual, ax, one);
        let r = self.select(large, big, small);
        if ty == ScalarType::F32 {
            r
        } else {
            self.as_(r, ScalarKind::Float, Some(ty.size_bytes() as u8))
        }
    }
}

/// `op` on two literals with the IR's (wrapping) semantics (floats may come out non-finite).
fn fold_binary(op: Bo, a: naga::Literal, b: naga::Literal) -> Option<naga::Literal> {
    use naga::Literal as L;
    macro_rules! int {
        ($x:expr, $y:expr, $v:path) => {
            match op {
                Bo::Add => Some($v($x.wrapping_add($y))),
                Bo::Subtract => Some($v($x.wrapping_sub($y))),
                Bo::Multiply => Some($v($x.wrapping_mul($y))),
                Bo::Divide if $y != 0 => Some($v($x.wrapping_div($y))),
                Bo::Modulo if $y != 0 => Some($v($x.wrapping_rem($y))),
                Bo::And => Some($v($x & $y)),
                Bo::InclusiveOr => Some($v($x | $y)),
                Bo::ExclusiveOr => Some($v($x ^ $y)),
                Bo::Equal => Some(L::Bool($x == $y)),
                Bo::NotEqual => Some(L::Bool($x != $y)),
                Bo::Less => Some(L::Bool($x < $y)),
                Bo::LessEqual => Some(L::Bool($x <= $y)),
                Bo::Greater => Some(L::Bool($x > $y)),
                Bo::GreaterEqual => Some(L::Bool($x >= $y)),
                _ => None,
            }
        };
    }
    macro_rules! float {
        ($x:expr, $y:expr, $v:path) => {
            match op {
                Bo::Add => Some($v($x + $y)),
                Bo::Subtract => Some($v($x - $y)),
                Bo::Multiply => Some($v($x * $y)),
                Bo::Divide => Some($v($x / $y)),
                Bo::Equal => Some(L::Bool($x == $y)),
                Bo::Less => Some(L::Bool($x < $y)),
                Bo::LessEqual => Some(L::Bool($x <= $y)),
                Bo::Greater => Some(L::Bool($x > $y)),
                Bo::GreaterEqual => Some(L::Bool($x >= $y)),
                _ => None,
            }
        };
    }
    let shift = |amount: u32, width: u32| (amount < width).then_some(amount);
    match (a, b) {
        (L::I32(x), L::I32(y)) => int!(x, y, L::I32),
        (L::U32(x), L::U32(y)) => int!(x, y, L::U32),
        (L::I64(x), L::I64(y)) => int!(x, y, L::I64),
        (L::U64(x), L::U64(y)) => int!(x, y, L::U64),
        (L::F32(x), L::F32(y)) => float!(x, y, L::F32),
        (L::F64(x), L::F64(y)) => float!(x, y, L::F64),
        (L::Bool(x), L::Bool(y)) => match op {
            Bo::LogicalAnd => Some(L::Bool(x && y)),
            Bo::LogicalOr => Some(L::Bool(x || y)),
            Bo::Equal => Some(L::Bool(x == y)),
            Bo::NotEqual => Some(L::Bool(x != y)),
            _ => None,
        },
        (x, L::U32(n)) if matches!(op, Bo::ShiftLeft | Bo::ShiftRight) => {
            let left = op == Bo::ShiftLeft;
            match x {
                L::I32(v) => shift(n, 32).map(|n| L::I32(if left { v << n } else { v >> n })),
                L::U32(v) => shift(n, 32).map(|n| L::U32(if left { v << n } else { v >> n })),
                L::I64(v) => shift(n, 64).map(|n| L::I64(if left { v << n } else { v >> n })),
                L::U64(v) => shift(n, 64).map(|n| L::U64(if left { v << n } else { v >> n })),
                _ => None,
            }
        }
        _ => None,
    }
}

/// `op` on a literal, where the result is a literal.
fn fold_unary(op: Uo, a: naga::Literal) -> Option<naga::Literal> {
    use naga::Literal as L;
    match (op, a) {
        (Uo::Negate, L::I32(v)) => Some(L::I32(v.wrapping_neg())),
        (Uo::Negate, L::I64(v)) => Some(L::I64(v.wrapping_neg())),
        (Uo::Negate, L::F32(v)) => Some(L::F32(-v)),
        (Uo::Negate, L::F64(v)) => Some(L::F64(-v)),
        (Uo::Negate, L::F16(v)) => Some(L::F16(-v)),
        (Uo::LogicalNot, L::Bool(v)) => Some(L::Bool(!v)),
        (Uo::BitwiseNot, L::I32(v)) => Some(L::I32(!v)),
        (Uo::BitwiseNot, L::U32(v)) => Some(L::U32(!v)),
        (Uo::BitwiseNot, L::I64(v)) => Some(L::I64(!v)),
        (Uo::BitwiseNot, L::U64(v)) => Some(L::U64(!v)),
        _ => None,
    }
}

/// A conversion of a literal, done now (naga's WGSL reader cannot evaluate some of them, e.g.
/// `f32(0lf)`). `None` where the result is no literal (a non-finite float) or the case is
/// not one this backend makes.
fn fold_as(l: naga::Literal, kind: ScalarKind, convert: Option<u8>) -> Option<naga::Literal> {
    use naga::Literal as L;
    let finite32 = |x: f32| x.is_finite().then_some(L::F32(x));
    let finite64 = |x: f64| x.is_finite().then_some(L::F64(x));
    match convert {
        None => match (l, kind) {
            (L::I32(v), ScalarKind::Uint) => Some(L::U32(v as u32)),
            (L::I32(v), ScalarKind::Float) => finite32(f32::from_bits(v as u32)),
            (L::U32(v), ScalarKind::Sint) => Some(L::I32(v as i32)),
            (L::U32(v), ScalarKind::Float) => finite32(f32::from_bits(v)),
            (L::F32(v), ScalarKind::Uint) => Some(L::U32(v.to_bits())),
            (L::F32(v), ScalarKind::Sint) => Some(L::I32(v.to_bits() as i32)),
            (L::I64(v), ScalarKind::Uint) => Some(L::U64(v as u64)),
            (L::I64(v), ScalarKind::Float) => finite64(f64::from_bits(v as u64)),
            (L::U64(v), ScalarKind::Sint) => Some(L::I64(v as i64)),
            (L::U64(v), ScalarKind::Float) => finite64(f64::from_bits(v)),
            (L::F64(v), ScalarKind::Uint) => Some(L::U64(v.to_bits())),
            (L::F64(v), ScalarKind::Sint) => Some(L::I64(v.to_bits() as i64)),
            _ => None,
        },
        Some(w) => {
            let float = match l {
                L::F16(h) => Some(h.to_f64()),
                L::F32(x) => Some(x as f64),
                L::F64(x) => Some(x),
                _ => None,
            };
            let int: Option<i128> = match l {
                L::I32(v) => Some(v as i128),
                L::U32(v) => Some(v as i128),
                L::I64(v) => Some(v as i128),
                L::U64(v) => Some(v as i128),
                _ => None,
            };
            match (kind, w) {
                (ScalarKind::Float, 2) => {
                    let h = match (float, int) {
                        (Some(x), _) => half::f16::from_f64(x),
                        (_, Some(i)) => half::f16::from_f64(i as f64),
                        _ => return None,
                    };
                    h.is_finite().then_some(L::F16(h))
                }
                (ScalarKind::Float, 4) => match (float, int) {
                    (Some(x), _) => finite32(x as f32),
                    (_, Some(i)) => finite32(i as f32),
                    _ => None,
                },
                (ScalarKind::Float, 8) => match (float, int) {
                    (Some(x), _) => finite64(x),
                    (_, Some(i)) => finite64(i as f64),
                    _ => None,
                },
                // Rust's float-to-integer `as` saturates and maps NaN to 0, as the IR does.
                (ScalarKind::Sint, 4) => Some(L::I32(float.map_or_else(|| int.unwrap_or(0) as i32, |x| x as i32))),
                (ScalarKind::Uint, 4) => Some(L::U32(float.map_or_else(|| int.unwrap_or(0) as u32, |x| x as u32))),
                (ScalarKind::Sint, 8) => Some(L::I64(float.map_or_else(|| int.unwrap_or(0) as i64, |x| x as i64))),
                (ScalarKind::Uint, 8) => Some(L::U64(float.map_or_else(|| int.unwrap_or(0) as u64, |x| x as u64))),
                _ => None,
            }
            .filter(|_| float.is_some() || int.is_some())
        }
    }
}

fn zero_literal(t: ScalarType) -> naga::Literal {
    match t {
        ScalarType::Bool => naga::Literal::Bool(false),
        ScalarType::I32 | ScalarType::I8 | ScalarType::I16 => naga::Literal::I32(0),
        ScalarType::U32 | ScalarType::U8 | ScalarType::U16 => naga::Literal::U32(0),
        ScalarType::I64 => naga::Literal::I64(0),
        ScalarType::U64 => naga::Literal::U64(0),
        ScalarType::F16 => naga::Literal::F16(half::f16::ZERO),
        ScalarType::F32 => naga::Literal::F32(0.0),
        ScalarType::F64 => naga::Literal::F64(0.0),
        other => unreachable!("{other} register"),
    }
}

fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' })
        .collect()
}
