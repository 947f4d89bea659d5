//! The smallest buffer each binding of a shader accepts, read from its naga module.
//!
//! wgpu checks binding sizes only when work is submitted, and work is submitted in
//! batches ([`super::batch`]): one undersized binding would fail a whole batch with an
//! error that names no dispatch. Knowing the sizes when the pipeline is created lets a
//! dispatch be refused on its own, with a message that says which binding and how many
//! bytes it needs.

use std::borrow::Cow;
use wgpu::naga;

/// Minimum byte sizes of the bindings of group 0, indexed by binding (`None`: not bound
/// or unknown). Empty when the source cannot be read here (wgpu then reports it).
pub(crate) fn min_binding_sizes(source: &wgpu::ShaderSource<'_>) -> Vec<Option<u64>> {
    let module: Cow<'_, naga::Module> = match source {
        wgpu::ShaderSource::Naga(m) => Cow::Borrowed(m.as_ref()),
        wgpu::ShaderSource::Wgsl(text) => match naga::front::wgsl::parse_str(text) {
            Ok(m) => Cow::Owned(m),
            Err(_) => return Vec::new(),
        },
        wgpu::ShaderSource::SpirV(words) => {
            match naga::front::spv::parse_u8_slice(bytemuck::cast_slice(words), &Default::default()) {
                Ok(m) => Cow::Owned(m),
                Err(_) => return Vec::new(),
            }
        }
        _ => return Vec::new(),
    };
    let mut layouter = naga::proc::Layouter::default();
    if layouter.update(module.to_ctx()).is_err() {
        return Vec::new();
    }
    let mut sizes = Vec::new();
    for (_, global) in module.global_variables.iter() {
        let Some(binding) = &global.binding else { continue };
        if binding.group != 0 {
            continue;
        }
        let i = binding.binding as usize;
        if sizes.len() <= i {
            sizes.resize(i + 1, None);
        }
        // A runtime-sized array's layout is one element: the least a binding may hold.
        sizes[i] = Some(u64::from(layouter[global.ty].size));
    }
    sizes
}
