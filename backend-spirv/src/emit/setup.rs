//! The module around the body: the entry point's builtin arguments, the storage buffers,
//! the print buffer, the launch block and the workgroup arrays (`Cx::new`), and the compute
//! entry point that the translated body becomes (`Cx::finish`).

use super::*;

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
pub(super) fn publishing_atomics(scan: &Scan) -> bool {
    scan.atomic.iter().any(|&a| a)
}

impl<'a> Cx<'a> {
    pub(super) fn new(k: &'a ThreadKernel, scan: &Scan, layout: &BindingLayout, target: &SpirvTarget) -> Cx<'a> {
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
                (_, e) if sub_word(*e) && scan.partial_words[i] => Holding::AtomicWords,
                // Vectors of words where every access moves whole ones (see `packable`).
                (_, e) if sub_word(*e) => {
                    let bytes = scan.fewest[i] * e.size_bytes();
                    Holding::Words(match bytes {
                        _ if !packable => 1,
                        16.. => 4,
                        8.. => 2,
                        _ => 1,
                    })
                }
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
                    ty(
                        &mut module,
                        TypeInner::Vector {
                            size: naga::VectorSize::Quad,
                            scalar: Scalar::U32,
                        },
                    ),
                    16,
                ),
                Holding::Words(1) => (ty(&mut module, TypeInner::Scalar(Scalar::U32)), 4),
                Holding::Words(n) => (
                    ty(
                        &mut module,
                        TypeInner::Vector {
                            size: if n == 4 {
                                naga::VectorSize::Quad
                            } else {
                                naga::VectorSize::Bi
                            },
                            scalar: Scalar::U32,
                        },
                    ),
                    4 * n,
                ),
                Holding::AtomicWords => (ty(&mut module, TypeInner::Atomic(Scalar::U32)), 4),
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
        let shared_arrays = k.shared_arrays();
        let mut arrays = Vec::new();
        for (i, &(elem, len)) in shared_arrays.arrays.iter().enumerate() {
            // Types narrower than a word are held widened, as in registers.
            let scalar = naga_scalar(elem);
            let elem_ty = ty(&mut module, TypeInner::Scalar(scalar));
            let arr = ty(
                &mut module,
                TypeInner::Array {
                    base: elem_ty,
                    size: naga::ArraySize::Constant(std::num::NonZeroU32::new(len).expect("verified non-empty")),
                    stride: scalar.width as u32,
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
        let shared: Vec<(H, u32)> = shared_arrays
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
            float64: target.shader_f64,
            exact_f64: target.exact_f64,
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
            combine_words: scan.combine_words,
            coop_load_fences: target.coop_load_fences && target.subgroups,
        }
    }

    pub(super) fn finish(mut self, entry_point: &str) -> Module {
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
}
