//! Memory-access hints that naga's IR cannot carry, added to the SPIR-V words it writes.
//!
//! The per-thread IR marks read-once loads with [`CacheModifier::Streaming`] (PTX
//! `ld.global.cs`). SPIR-V 1.4 has the matching hint, the `Nontemporal` memory operand, but
//! a naga module has no place for it, so it is added after naga has written the words:
//! [`streaming_bindings`] finds the storage buffers whose every load is streaming, and
//! [`mark_nontemporal`] puts `Nontemporal` on each `OpLoad` through those buffers.
//!
//! The hint is per binding, not per load, because naga's output keeps no trace of which IR
//! load wrote which `OpLoad`: a buffer that is also loaded without the hint keeps none.
//! A hint changes no result, so marking more or fewer loads is never wrong, only slower.
//!
//! The other addition is not a hint: [`coherent_bindings`] are the storage buffers that a
//! kernel with global atomics both loads and stores, which other workgroups may publish
//! through under a lock (the layer norm tutorial's partial sums); [`mark_coherent`]
//! decorates their variables `Coherent`, without which a device's incoherent caches may
//! return another workgroup's stale values (measured on an H100 through Vulkan).
//!
//! And one more hint: [`read_only_bindings`] are the storage buffers a kernel loads from and
//! never writes, which [`mark_nonwritable`] decorates `NonWritable` (what WGSL's
//! `var<storage, read>` says). rutile binds every buffer read-write, so a naga module
//! cannot say it; without it NVIDIA's Vulkan driver makes every load a strong load at the
//! multiprocessor's scope (`LDG.E.64.STRONG.SM`, branched around where masked; read off
//! the driver's machine code on an H200), where for a buffer declared read-only it makes
//! the read-only cached load (`LDG.E.CONSTANT`, predicated). One buffer bound to two
//! parameters, one loaded and one stored, is the case this could change: a load through the
//! read-only path may miss a store made through the other binding in the same launch. SPIR-V
//! already lets a driver assume that variables without `Aliased` do not alias, which naga's
//! modules never declare, so such launches were not defined on Vulkan before either; loads
//! of elements before any store to them (an in-place elementwise kernel) are unaffected.

use crate::{BindingLayout, SpirvError};
use rspirv::binary::Assemble;
use rspirv::dr::Operand;
use rspirv::spirv::{Decoration, MemoryAccess, Op};
use rutile_ir::ir::CacheModifier;
use rutile_ir::thread::{Memory, Stmt, ThreadKernel};
use std::collections::HashSet;

/// Bindings of the storage buffers that `kernel` loads from, and only with
/// [`CacheModifier::Streaming`], in increasing order.
pub(crate) fn streaming_bindings(kernel: &ThreadKernel, layout: &BindingLayout) -> Vec<u32> {
    let params = kernel.params.len();
    let (mut streaming, mut plain) = (vec![false; params], vec![false; params]);
    kernel.walk(&mut |s| {
        if let Stmt::Load {
            mem: Memory::Global { param },
            cache,
            ..
        } = s
        {
            let p = *param as usize;
            match cache {
                CacheModifier::Streaming => streaming[p] = true,
                CacheModifier::Default => plain[p] = true,
            }
        }
    });
    layout
        .storage
        .iter()
        .filter(|s| streaming[s.param as usize] && !plain[s.param as usize])
        .map(|s| s.binding)
        .collect()
}

/// Whether `module` is under the Vulkan memory model (naga's choice where it has
/// cooperative matrices).
fn under_vulkan_memory_model(module: &rspirv::dr::Module) -> bool {
    module.memory_model.as_ref().is_some_and(|m| {
        matches!(
            m.operands.get(1),
            Some(Operand::MemoryModel(rspirv::spirv::MemoryModel::Vulkan))
        )
    })
}

/// The module naga wrote, as `rspirv`'s, to add to.
pub(crate) fn read_back(words: &[u32]) -> Result<rspirv::dr::Module, SpirvError> {
    rspirv::dr::load_words(words).map_err(|e| SpirvError::SpirvWriter(format!("reading back naga's SPIR-V: {e}")))
}

/// Every instruction of `module`'s functions, in order, to change.
fn instructions_mut(module: &mut rspirv::dr::Module) -> impl Iterator<Item = &mut rspirv::dr::Instruction> {
    module
        .functions
        .iter_mut()
        .flat_map(|f| f.blocks.iter_mut().flat_map(|b| b.instructions.iter_mut()))
}

/// `module`'s types and global values made by `opcode`.
fn globals(module: &rspirv::dr::Module, opcode: Op) -> impl Iterator<Item = &rspirv::dr::Instruction> {
    module
        .types_global_values
        .iter()
        .filter(move |i| i.class.opcode == opcode)
}

/// How a kernel uses each of its parameters' global memory.
struct GlobalUse {
    loaded: Vec<bool>,
    stored: Vec<bool>,
    atomic: Vec<bool>,
}

impl GlobalUse {
    fn of(kernel: &ThreadKernel) -> GlobalUse {
        let params = kernel.params.len();
        let mut u = GlobalUse {
            loaded: vec![false; params],
            stored: vec![false; params],
            atomic: vec![false; params],
        };
        kernel.walk(&mut |s| match s {
            Stmt::Load {
                mem: Memory::Global { param },
                ..
            } => u.loaded[*param as usize] = true,
            Stmt::Store {
                mem: Memory::Global { param },
                ..
            } => u.stored[*param as usize] = true,
            Stmt::Atomic { param, .. } | Stmt::AtomicCas { param, .. } => u.atomic[*param as usize] = true,
            _ => {}
        });
        u
    }

    /// The bindings of the storage buffers whose parameter `keep` accepts, in `layout`'s
    /// (increasing) order.
    fn bindings(&self, layout: &BindingLayout, keep: impl Fn(usize) -> bool) -> Vec<u32> {
        layout
            .storage
            .iter()
            .filter(|s| keep(s.param as usize))
            .map(|s| s.binding)
            .collect()
    }
}

/// Bindings of the storage buffers that `kernel` both loads and stores (not atomically),
/// where the kernel also has global atomics; in increasing order. Other workgroups may
/// store what such a kernel loads after an atomic tells it they have.
pub(crate) fn coherent_bindings(kernel: &ThreadKernel, layout: &BindingLayout) -> Vec<u32> {
    let u = GlobalUse::of(kernel);
    if !u.atomic.contains(&true) {
        return Vec::new();
    }
    u.bindings(layout, |p| u.loaded[p] && u.stored[p])
}

/// Bindings of the storage buffers that `kernel` loads from and never writes (no store, no
/// atomic), in increasing order.
pub(crate) fn read_only_bindings(kernel: &ThreadKernel, layout: &BindingLayout) -> Vec<u32> {
    let u = GlobalUse::of(kernel);
    u.bindings(layout, |p| u.loaded[p] && !u.stored[p] && !u.atomic[p])
}

/// The variables of descriptor set 0 bound at one of `bindings` (every variable has one
/// binding and one set, and rutile puts everything in set 0).
fn bound_variables(module: &rspirv::dr::Module, bindings: &[u32]) -> HashSet<u32> {
    module
        .annotations
        .iter()
        .filter(|a| a.class.opcode == Op::Decorate)
        .filter_map(|a| match a.operands.as_slice() {
            [Operand::IdRef(target), Operand::Decoration(Decoration::Binding), Operand::LiteralBit32(b)]
                if bindings.contains(b) =>
            {
                Some(*target)
            }
            _ => None,
        })
        .collect()
}

/// `words` with the variables bound at `bindings` decorated `Coherent`. Only for modules
/// under the GLSL450 memory model: the Vulkan memory model has no such decoration (its
/// accesses would take availability and visibility operands instead), and is refused.
pub(crate) fn mark_coherent(words: &[u32], bindings: &[u32]) -> Result<Vec<u32>, SpirvError> {
    let module = read_back(words)?;
    let vulkan_model = under_vulkan_memory_model(&module);
    if vulkan_model {
        return Err(SpirvError::SpirvWriter(
            "coherent storage buffers (a kernel publishing stores through atomics) under the Vulkan memory model \
             (cooperative matrices) are not supported"
                .into(),
        ));
    }
    decorate_variables(words, bindings, Decoration::Coherent)
}

/// `words` with the variables bound at `bindings` decorated `NonWritable` (SPIR-V 1.4
/// allows the decoration on a storage-buffer variable; before, only on a block's members).
pub(crate) fn mark_nonwritable(words: &[u32], bindings: &[u32]) -> Result<Vec<u32>, SpirvError> {
    decorate_variables(words, bindings, Decoration::NonWritable)
}

/// `words` with the variables bound at `bindings` decorated `decoration`, unless they are
/// already.
fn decorate_variables(words: &[u32], bindings: &[u32], decoration: Decoration) -> Result<Vec<u32>, SpirvError> {
    let mut module = read_back(words)?;
    let already: HashSet<u32> = module
        .annotations
        .iter()
        .filter(|a| a.class.opcode == Op::Decorate)
        .filter_map(|a| match a.operands.as_slice() {
            [Operand::IdRef(target), Operand::Decoration(d), ..] if *d == decoration => Some(*target),
            _ => None,
        })
        .collect();
    let mut variables: Vec<u32> = bound_variables(&module, bindings)
        .into_iter()
        .filter(|v| !already.contains(v))
        .collect();
    variables.sort_unstable();
    for v in variables {
        module.annotations.push(rspirv::dr::Instruction::new(
            Op::Decorate,
            None,
            None,
            vec![Operand::IdRef(v), Operand::Decoration(decoration)],
        ));
    }
    Ok(module.assemble())
}

/// `words` (SPIR-V 1.4 or later) with the `Nontemporal` memory operand on every `OpLoad`
/// whose pointer derives from a variable of descriptor set 0 at one of `bindings`.
pub(crate) fn mark_nontemporal(words: &[u32], bindings: &[u32]) -> Result<Vec<u32>, SpirvError> {
    let mut module = read_back(words)?;
    let version = module.header.as_ref().map_or((0, 0), |h| h.version());
    if version < (1, 4) {
        return Err(SpirvError::SpirvWriter(format!(
            "the Nontemporal memory operand needs SPIR-V 1.4, the module is {}.{}",
            version.0, version.1
        )));
    }

    let mut pointers = bound_variables(&module, bindings);

    for inst in instructions_mut(&mut module) {
        match inst.class.opcode {
            // SPIR-V lays out a function's blocks so that each comes before the
            // blocks it dominates, and only `OpPhi` may use a value defined later:
            // one pass sees every access chain before the loads through it.
            Op::AccessChain | Op::InBoundsAccessChain | Op::PtrAccessChain | Op::CopyObject => {
                if let (Some(Operand::IdRef(base)), Some(id)) = (inst.operands.first(), inst.result_id) {
                    if pointers.contains(base) {
                        pointers.insert(id);
                    }
                }
            }
            Op::Load => {
                let Some(Operand::IdRef(pointer)) = inst.operands.first() else {
                    continue;
                };
                if !pointers.contains(pointer) {
                    continue;
                }
                match inst.operands.get_mut(1) {
                    Some(Operand::MemoryAccess(mask)) => *mask |= MemoryAccess::NONTEMPORAL,
                    _ => inst
                        .operands
                        .insert(1, Operand::MemoryAccess(MemoryAccess::NONTEMPORAL)),
                }
            }
            _ => {}
        }
    }
    Ok(module.assemble())
}

/// `words` without the `ArrayStride` decorations naga puts on the array types of workgroup
/// variables. Vulkan allows an explicit layout there only with
/// `workgroupMemoryExplicitLayout` (`VUID-StandaloneSpirv-None-10684`, which recent
/// spirv-val checks); the arrays' elements are scalars, so the stride said nothing the
/// driver does not know.
pub(crate) fn strip_workgroup_strides(words: &[u32]) -> Result<Vec<u32>, SpirvError> {
    use rspirv::spirv::StorageClass;
    let mut module = read_back(words)?;
    let workgroup_pointees: HashSet<u32> = globals(&module, Op::TypePointer)
        .filter_map(|i| match i.operands.as_slice() {
            [Operand::StorageClass(StorageClass::Workgroup), Operand::IdRef(t)] => Some(*t),
            _ => None,
        })
        .collect();
    // Arrays used elsewhere (a storage buffer's) keep their stride.
    let elsewhere: HashSet<u32> = globals(&module, Op::TypePointer)
        .filter_map(|i| match i.operands.as_slice() {
            [Operand::StorageClass(c), Operand::IdRef(t)] if *c != StorageClass::Workgroup => Some(*t),
            _ => None,
        })
        .collect();
    let arrays: HashSet<u32> = globals(&module, Op::TypeArray)
        .filter_map(|i| i.result_id)
        .filter(|id| workgroup_pointees.contains(id) && !elsewhere.contains(id))
        .collect();
    if arrays.is_empty() {
        return Ok(words.to_vec());
    }
    module.annotations.retain(|a| {
        !(a.class.opcode == Op::Decorate
            && matches!(a.operands.as_slice(),
                [Operand::IdRef(t), Operand::Decoration(Decoration::ArrayStride), ..] if arrays.contains(t)))
    });
    Ok(module.assemble())
}

/// Whether `kernel` multiplies cooperative matrices element by element.
pub(crate) fn has_coop_products(kernel: &ThreadKernel) -> bool {
    let mut found = false;
    kernel.walk(&mut |s| found |= matches!(s, Stmt::CoopMul { .. }));
    found
}

/// `words` with every `OpFSub` of cooperative matrices made `OpFMul`: how the module, which
/// naga's IR lets say only a subtraction of two such matrices, spells the element-wise
/// products of `Stmt::CoopMul` (rutile subtracts cooperative matrices nowhere else).
pub(crate) fn coop_products(words: &[u32]) -> Result<Vec<u32>, SpirvError> {
    let mut module = read_back(words)?;
    let matrices: HashSet<u32> = globals(&module, Op::TypeCooperativeMatrixKHR)
        .filter_map(|i| i.result_id)
        .collect();
    for inst in instructions_mut(&mut module) {
        if inst.class.opcode == Op::FSub && inst.result_type.is_some_and(|t| matrices.contains(&t)) {
            *inst = rspirv::dr::Instruction::new(
                Op::FMul,
                inst.result_type,
                inst.result_id,
                std::mem::take(&mut inst.operands),
            );
        }
    }
    Ok(module.assemble())
}

/// `words` with workgroup memory ordered by the barriers, for modules under the Vulkan
/// memory model (those with cooperative matrices, which naga writes under it): every
/// `OpControlBarrier` and `OpMemoryBarrier` on workgroup memory also makes its writes
/// available and visible (`MakeAvailable | MakeVisible`), and every access through a
/// workgroup pointer (`OpLoad`, `OpStore`, the cooperative loads and stores) is marked
/// `NonPrivatePointer`. naga writes neither, and under the Vulkan memory model an access
/// without `NonPrivatePointer` is private to its invocation: no barrier orders it for the
/// others, and a driver may keep such values in registers across barriers. On an H200
/// through NVIDIA's driver this changed neither the Vulkan matmul's speed nor any result
/// measured (attention's one wrong configuration stayed wrong); it is what the model
/// requires of a driver that relies on its letter. Modules under the GLSL450 memory model come back unchanged
/// (barriers order all shared memory there).
pub(crate) fn order_workgroup_memory(words: &[u32]) -> Result<Vec<u32>, SpirvError> {
    use rspirv::spirv::{MemorySemantics, StorageClass};
    let mut module = read_back(words)?;
    let vulkan_model = under_vulkan_memory_model(&module);
    if !vulkan_model {
        return Ok(words.to_vec());
    }
    let constants: std::collections::HashMap<u32, (u32, u32)> = globals(&module, Op::Constant)
        .filter_map(|i| match (i.result_id, i.result_type, i.operands.as_slice()) {
            (Some(id), Some(ty), [Operand::LiteralBit32(v)]) => Some((id, (ty, *v))),
            _ => None,
        })
        .collect();
    let workgroup_pointers: HashSet<u32> = globals(&module, Op::TypePointer)
        .filter(|i| matches!(i.operands.first(), Some(Operand::StorageClass(StorageClass::Workgroup))))
        .filter_map(|i| i.result_id)
        .collect();
    let mut type_of: std::collections::HashMap<u32, u32> = std::collections::HashMap::new();
    let global_values = module.types_global_values.iter();
    let locals = module
        .functions
        .iter()
        .flat_map(|f| f.blocks.iter().flat_map(|b| b.instructions.iter()));
    for i in global_values.chain(locals) {
        if let (Some(id), Some(ty)) = (i.result_id, i.result_type) {
            type_of.insert(id, ty);
        }
    }
    let in_workgroup = |p: Option<&Operand>| match p {
        Some(Operand::IdRef(p)) => type_of.get(p).is_some_and(|t| workgroup_pointers.contains(t)),
        _ => false,
    };
    let ordering = (MemorySemantics::MAKE_AVAILABLE | MemorySemantics::MAKE_VISIBLE).bits();
    let workgroup = MemorySemantics::WORKGROUP_MEMORY.bits();
    let mut bound = module.header.as_ref().map_or(0, |h| h.bound);
    let mut added: std::collections::HashMap<u32, u32> = std::collections::HashMap::new();
    let mut new_constants = Vec::new();
    for inst in instructions_mut(&mut module) {
        // Where the memory operand goes: after the pointer (and the object, the
        // layout and the stride).
        let operand_at = match inst.class.opcode {
            Op::ControlBarrier | Op::MemoryBarrier => {
                let at = if inst.class.opcode == Op::ControlBarrier { 2 } else { 1 };
                let Some(Operand::IdMemorySemantics(semantics)) = inst.operands.get(at).cloned() else {
                    continue;
                };
                let Some(&(ty, value)) = constants.get(&semantics) else {
                    continue;
                };
                if value & workgroup == 0 || value & ordering == ordering {
                    continue;
                }
                let id = *added.entry(semantics).or_insert_with(|| {
                    let id = bound;
                    bound += 1;
                    new_constants.push(rspirv::dr::Instruction::new(
                        Op::Constant,
                        Some(ty),
                        Some(id),
                        vec![Operand::LiteralBit32(value | ordering)],
                    ));
                    id
                });
                inst.operands[at] = Operand::IdMemorySemantics(id);
                continue;
            }
            Op::Load if in_workgroup(inst.operands.first()) => 1,
            Op::Store if in_workgroup(inst.operands.first()) => 2,
            Op::CooperativeMatrixLoadKHR if in_workgroup(inst.operands.first()) && inst.operands.len() >= 3 => 3,
            Op::CooperativeMatrixStoreKHR if in_workgroup(inst.operands.first()) && inst.operands.len() >= 4 => 4,
            _ => continue,
        };
        match inst.operands.get_mut(operand_at) {
            Some(Operand::MemoryAccess(mask)) => *mask |= MemoryAccess::NON_PRIVATE_POINTER,
            _ => inst
                .operands
                .insert(operand_at, Operand::MemoryAccess(MemoryAccess::NON_PRIVATE_POINTER)),
        }
    }
    module.types_global_values.extend(new_constants);
    if let Some(h) = module.header.as_mut() {
        h.bound = bound;
    }
    Ok(module.assemble())
}
