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
use rutile_ir::thread::{product_pairs, Expr, Memory, ProductRole, Reg, Special, Stmt, ThreadKernel, ThreadParam};
use rutile_ir::ScalarType;

type H = Handle<Expression>;
type R<T> = Result<T, SpirvError>;
const SPAN: Span = Span::UNDEFINED;

mod atomic;
mod coop;
mod expr;
mod extra_math;
mod fold;
mod packed;
mod print;
mod scan;

use fold::*;
use scan::*;

/// Translates `kernel` for `target` and validates the result.
pub fn emit(kernel: &ThreadKernel, target: &SpirvTarget) -> Result<SpirvKernel, SpirvError> {
    rutile_ir::thread::verify(kernel).map_err(|message| SpirvError::InvalidKernel {
        kernel: kernel.name.clone(),
        message,
    })?;
    if kernel.cluster > 1 {
        return Err(unsupported(
            kernel,
            "thread-block clusters",
            format!(
                "Vulkan has no clusters, the kernel was lowered for clusters of {} programs",
                kernel.cluster
            ),
        ));
    }
    let scan = Scan::new(kernel, target)?;
    let layout = BindingLayout::new(kernel, &scan.atomic, scan.prints, target);
    let mut cx = Cx::new(kernel, &scan, &layout, target);
    cx.preamble(&scan);
    cx.stmts(&kernel.body)?;
    cx.flush();
    let prints = std::mem::take(&mut cx.prints);
    let entry_point = entry_name(&kernel.name);
    let module = cx.finish(&entry_point);

    let mut caps = naga::valid::Capabilities::empty();
    caps.set(naga::valid::Capabilities::SHADER_FLOAT16, target.shader_f16);
    caps.set(naga::valid::Capabilities::SHADER_INT64, target.shader_i64);
    caps.set(naga::valid::Capabilities::SHADER_INT16, target.shader_i16);
    caps.set(naga::valid::Capabilities::FLOAT64, target.shader_f64);
    caps.set(naga::valid::Capabilities::SUBGROUP, target.subgroups);
    caps.set(naga::valid::Capabilities::COOPERATIVE_MATRIX, scan.coop);
    caps.set(
        naga::valid::Capabilities::SUBGROUP_BARRIER,
        scan.coop && target.subgroups && target.coop_load_fences,
    );
    // `pack2x16float` / `unpack2x16float` of the `f16` buffers held as words (core in
    // Vulkan: GLSL.std.450's PackHalf2x16 and UnpackHalf2x16).
    caps.set(naga::valid::Capabilities::SHADER_FLOAT16_IN_FLOAT32, target.packed_f16);
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
                module_dump: format!("{module:#?}"),
            });
        }
    };
    Ok(SpirvKernel {
        module,
        info,
        entry_point,
        streaming_bindings: crate::hints::streaming_bindings(kernel, &layout),
        coherent_bindings: crate::hints::coherent_bindings(kernel, &layout),
        read_only_bindings: crate::hints::read_only_bindings(kernel, &layout),
        coop_products: crate::hints::has_coop_products(kernel),
        cooperative_matrices: !kernel.coop.is_empty(),
        bindings: layout,
        prints,
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
    /// `array<vec4<T>>` of a 4-byte `T` or of `f16` ([`vector_element`]): 16-byte loads and
    /// stores move one whole vector (two of `f16`), single elements are vector components
    /// (the buffer is a multiple of 16 bytes).
    Vec4,
    /// `array<vec4<u32>>` holding `f16` pairs ([`SpirvTarget::packed_f16`]): 16-byte loads
    /// and stores move one whole vector, each word's halves reinterpreted as 16-bit integers
    /// (or, without them, unpacked to and packed from `f32`). Only for buffers that every
    /// access moves in whole vectors (a store of one `f16` would rewrite its neighbour in
    /// the word), and only in kernels without loops or cooperative matrices: measured
    /// through NVIDIA's driver on an H100, an `f16` copy went from 76% to 93% of the copy
    /// ceiling and the one-pass layer norm gained 5–7 points, but the long-row layer norm
    /// (a loop) lost up to 8 and the cooperative-matrix matmul (in its main loop) a quarter
    /// or more, whether the halves went through `f32` or not (16-byte accesses in loops
    /// measured slower on that driver before: `backends/vulkan.rs`).
    PackedF16,
    /// `atomic<i32>` / `atomic<u32>`.
    Atomic,
    /// `atomic<u32>` holding `f32` bits.
    AtomicF32Bits,
}

/// Whether a buffer of `elem` can be held as `vec4`s: 4-byte types, and `f16`, whose
/// 16-byte accesses (eight elements) would otherwise be eight 2-byte loads or stores. The
/// narrower integers are held widened to 32 bits in registers, not in memory, so they stay
/// plain.
fn vector_element(elem: ScalarType) -> bool {
    (elem.size_bytes() == 4 && elem != ScalarType::Bool) || elem == ScalarType::F16
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
    /// Per cooperative matrix: its function variable, once used.
    coop: Vec<Option<H>>,
    /// Per parameter: its storage buffer (pointers).
    buffers: Vec<Option<Buffer>>,
    /// Per parameter: its value, read at the top (scalars in use).
    param_value: Vec<Option<H>>,
    /// Per shared buffer, its workgroup array and the index there of its first element.
    shared: Vec<(H, u32)>,
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
    /// What a barrier orders: workgroup memory, and in kernels with global atomics storage
    /// buffers too (see [`publishing_atomics`]).
    barrier: naga::Barrier,
    /// Whether 64-bit integers are available (`umulhi` of 32-bit values is then one wide
    /// multiply).
    int64: bool,
    /// Both halves of a 32-bit product from one 64-bit multiply (`SpirvTarget::wide_products`).
    wide_products: bool,
    /// 16-bit integers: `f16` pairs of packed words by bit operations (`packed.rs`).
    int16: bool,
    /// The print buffer (an `array<atomic<u32>>`), where the kernel prints (`print.rs`).
    print: Option<H>,
    /// The print sites emitted so far, in record order.
    prints: Vec<crate::PrintSite>,
    /// A subgroup barrier before every cooperative-matrix load
    /// ([`crate::SpirvTarget::coop_load_fences`]).
    coop_load_fences: bool,
}

/// A read-write storage buffer of type `ty` at `binding` of group 0, named `name`: the
/// expression of its pointer in `f`.
fn storage_buffer(module: &mut Module, f: &mut Function, name: &str, ty: Handle<Type>, binding: u32) -> H {
    let gv = module.global_variables.append(
        GlobalVariable {
            name: Some(name.to_string()),
            space: AddressSpace::Storage {
                access: naga::StorageAccess::LOAD | naga::StorageAccess::STORE,
            },
            binding: Some(ResourceBinding { group: 0, binding }),
            ty,
            init: None,
            memory_decorations: naga::MemoryDecorations::empty(),
        },
        SPAN,
    );
    f.expressions.append(Expression::GlobalVariable(gv), SPAN)
}

/// Whether a kernel has global atomics, which other workgroups may use to publish or
/// observe plain stores (a lock built on `atomic_cas`, as the layer norm tutorial's).
/// naga's atomics are relaxed, so such a kernel's barriers also order its storage buffers
/// at device scope: an acquire-release fence for the workgroup's stores before a barrier
/// (the partial sums a lock's release publishes) and its loads after one (those the
/// workgroup reads after taking the lock).
fn publishing_atomics(scan: &Scan) -> bool {
    scan.atomic.iter().any(|&a| a)
}

impl<'a> Cx<'a> {
    fn new(k: &'a ThreadKernel, scan: &Scan, layout: &BindingLayout, target: &SpirvTarget) -> Cx<'a> {
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
            // Packed words where measured faster: kernels without loops or cooperative
            // matrices (see `Holding::PackedF16`).
            let packable = target.packed_f16 && !scan.loops && !scan.coop;
            let holding = match (scan.atomic[i], elem) {
                (false, ScalarType::F16) if packable && scan.vec4[i] && scan.whole_16[i] => Holding::PackedF16,
                (false, _) if scan.vec4[i] && vector_element(*elem) => Holding::Vec4,
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
                    4 * elem.size_bytes() as u32,
                ),
                Holding::PackedF16 => (
                    {
                        // The halves' type, in the module so that the WGSL writer enables it.
                        if target.shader_i16 {
                            ty(
                                &mut module,
                                TypeInner::Scalar(Scalar {
                                    kind: ScalarKind::Uint,
                                    width: 2,
                                }),
                            );
                        }
                        ty(
                            &mut module,
                            TypeInner::Vector {
                                size: naga::VectorSize::Quad,
                                scalar: Scalar::U32,
                            },
                        )
                    },
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
            let ptr = storage_buffer(&mut module, &mut f, name, arr, binding);
            buffers.push(Some(Buffer { ptr, holding, elem_ty }));
        }

        // The print buffer.
        let print = layout.print.map(|binding| {
            let word = ty(&mut module, TypeInner::Atomic(Scalar::U32));
            let arr = ty(
                &mut module,
                TypeInner::Array {
                    base: word,
                    size: naga::ArraySize::Dynamic,
                    stride: 4,
                },
            );
            storage_buffer(&mut module, &mut f, "rutile_print", arr, binding)
        });

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

        // Shared memory: a workgroup array per element type, where buffers of one type that
        // are never in use at once share elements (`SharedReuse::SameType`), or per buffer.
        let layout = k.shared_arrays();
        let mut arrays = Vec::new();
        for (i, &(elem, len)) in layout.arrays.iter().enumerate() {
            let elem_ty = ty(&mut module, TypeInner::Scalar(naga_scalar(elem)));
            let arr = ty(
                &mut module,
                TypeInner::Array {
                    base: elem_ty,
                    size: naga::ArraySize::Constant(std::num::NonZeroU32::new(len).expect("verified non-empty")),
                    stride: elem.size_bytes() as u32,
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
            arrays.push(f.expressions.append(Expression::GlobalVariable(gv), SPAN));
        }
        let shared: Vec<(H, u32)> = layout
            .of_buffer
            .iter()
            .map(|&(array, first)| (arrays[array], first))
            .collect();

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
            coop: vec![None; k.coop.len()],
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
            int64: target.shader_i64,
            wide_products: target.wide_products,
            int16: target.shader_i16,
            barrier: if publishing_atomics(scan) {
                naga::Barrier::WORK_GROUP | naga::Barrier::STORAGE
            } else {
                naga::Barrier::WORK_GROUP
            },
            temps: 0,
            print,
            prints: Vec::new(),
            coop_load_fences: target.coop_load_fences && target.subgroups,
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
    /// A loop around `body`, left only by the `break` statements `body` holds.
    fn loop_until_break(&mut self, body: Block) {
        self.stmt(Statement::Loop {
            body,
            continuing: Block::new(),
            break_if: None,
        });
    }

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
        // `umulhi(a, b)` and `a * b` of the same 32-bit registers from one 64-bit product
        // where the device has 64-bit integers (`rutile_ir::thread::product_pairs`).
        let pairs = (self.int64 && self.wide_products).then(|| product_pairs(self.k, stmts));
        let mut products = Vec::new();
        for (i, s) in stmts.iter().enumerate() {
            match pairs.as_ref().and_then(|p| p[i]) {
                Some(role) => self.product_pair(s, role, &mut products),
                None => self.statement(s)?,
            }
        }
        Ok(())
    }

    /// Statement `s` of a product pair: the pair's first computes the 64-bit product of its
    /// operands (a new slot of `products`), and each takes its own half of it.
    fn product_pair(&mut self, s: &Stmt, role: ProductRole, products: &mut Vec<H>) {
        let Stmt::Set { dst, .. } = s else {
            unreachable!("a product pair is of `Set`s")
        };
        let (slot, high) = match role {
            ProductRole::First { slot, a, b, high } => {
                let (x, y) = (self.read(a), self.read(b));
                let product = self.wide_product(self.k.reg_type(a), x, y);
                debug_assert_eq!(products.len(), slot);
                products.push(product);
                (slot, high)
            }
            ProductRole::Second { slot, high } => (slot, high),
        };
        let half = self.product_half(self.k.reg_type(*dst), products[slot], high);
        self.write(*dst, half);
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
                if cx.holding(*mem) == Holding::PackedF16 {
                    cx.load_packed(*mem, base, dsts);
                    return Ok(());
                }
                if cx.holding(*mem) == Holding::Vec4 && dsts.len() % 4 == 0 {
                    // Whole vectors (the index is aligned: see `Stmt::Load`).
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
                if cx.holding(*mem) == Holding::PackedF16 {
                    cx.store_packed(*mem, base, values);
                    return Ok(());
                }
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
            Stmt::Mma { .. }
            | Stmt::MmaTf32 { .. }
            | Stmt::LdMatrix { .. }
            | Stmt::AsyncCopy { .. }
            | Stmt::AsyncCommit
            | Stmt::AsyncWait { .. }
            | Stmt::Wgmma { .. }
            | Stmt::FenceProxyAsync
            | Stmt::WgmmaFence
            | Stmt::WgmmaCommit
            | Stmt::WgmmaWait { .. }
            | Stmt::MbarrierInit { .. }
            | Stmt::MbarrierArriveExpectTx { .. }
            | Stmt::MbarrierWait { .. }
            | Stmt::MbarrierInval { .. }
            | Stmt::TmaLoad { .. }
            | Stmt::TmaStore { .. }
            | Stmt::BulkCommit { .. }
            | Stmt::BulkWaitRead { .. } => {
                return Err(unsupported(
                    self.k,
                    "mma.sync",
                    "lower `dot` without matrix units for SPIR-V".into(),
                ))
            }
            Stmt::ClusterStore { .. } | Stmt::ClusterBarrier | Stmt::ClusterArrive | Stmt::ClusterWait => {
                return Err(unsupported(
                    self.k,
                    "thread-block clusters",
                    "Vulkan has no clusters: launch with a cluster of 1 program".into(),
                ))
            }
            Stmt::MbarrierArrive { .. }
            | Stmt::Specialized { .. }
            | Stmt::NamedBarrier { .. }
            | Stmt::Turn { .. }
            | Stmt::SetMaxRegisters { .. } => {
                return Err(unsupported(
                    self.k,
                    "warp specialization",
                    "lower without `warp_specialize` for SPIR-V".into(),
                ))
            }
            Stmt::CoopLoad { .. }
            | Stmt::CoopStore { .. }
            | Stmt::CoopMulAdd { .. }
            | Stmt::CoopMul { .. }
            | Stmt::CoopZero { .. } => self.coop_stmt(s),
            Stmt::Barrier => self.stmt(Statement::ControlBarrier(self.barrier)),
            Stmt::Print {
                prefix,
                coords,
                values,
                pred,
                program,
            } => self.print(prefix, coords, values, *pred, *program)?,
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
                self.loop_until_break(body);
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
        let offset = match mem {
            Memory::Shared { alloc } => offset + self.shared[alloc as usize].1,
            Memory::Global { .. } => offset,
        };
        let index = if offset == 0 {
            base
        } else {
            let o = self.u32c(offset);
            self.bin(Bo::Add, base, o)
        };
        let buf = match mem {
            Memory::Global { .. } => self.buffer(mem).ptr,
            Memory::Shared { alloc } => self.shared[alloc as usize].0,
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

    /// A pointer to the `chunk`-th whole array element from element `base` (a multiple of
    /// the elements each holds: 4 in a [`Holding::Vec4`] buffer, 8 in a
    /// [`Holding::PackedF16`] one).
    fn vector_at(&mut self, mem: Memory, base: H, chunk: u32) -> H {
        let buffer = self.buffer(mem);
        let (buf, per_vector) = (buffer.ptr, if buffer.holding == Holding::PackedF16 { 8 } else { 4 });
        let shift = self.u32c(u32::trailing_zeros(per_vector));
        let mut vector = self.bin(Bo::ShiftRight, base, shift);
        if chunk > 0 {
            let c = self.u32c(chunk);
            vector = self.bin(Bo::Add, vector, c);
        }
        self.e(Expression::Access {
            base: buf,
            index: vector,
        })
    }
}

fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| if c.is_ascii_alphanumeric() || c == '_' { c } else { '_' })
        .collect()
}
