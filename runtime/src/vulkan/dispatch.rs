//! Running a compute pipeline over a grid of workgroups, optionally timed on the GPU.

use super::buffer::{read_back, WgpuBuffer};
use super::device::WgpuDevice;
use super::error::WgpuError;
use super::pipeline::{LaunchData, WgpuPipeline};

const AXES: [&str; 3] = ["x", "y", "z"];

/// Uniform buffers are allocated in multiples of this many bytes (WGSL's uniform struct
/// alignment), so a shader's uniform struct never reads past the end.
const UNIFORM_ALIGN: usize = 16;

/// Splits a grid of workgroups into dispatches of at most `max` workgroups per dimension
/// (a `max` of 0 counts as 1).
///
/// Returns `(offset, count)` pairs: the dispatch covers workgroups `offset[d] ..
/// offset[d] + count[d]` in each dimension `d`, and the kernel must add `offset` to its
/// workgroup (program) id. Together the pieces cover every workgroup of the grid exactly
/// once; a grid with a zero dimension gives no piece.
pub fn split_grid(grid: [u32; 3], max: u32) -> Vec<([u32; 3], [u32; 3])> {
    let max = max.max(1);
    let chunks = |n: u32| -> Vec<(u32, u32)> {
        (0..n.div_ceil(max))
            .map(|i| {
                let start = i * max;
                (start, (n - start).min(max))
            })
            .collect()
    };
    let (xs, ys, zs) = (chunks(grid[0]), chunks(grid[1]), chunks(grid[2]));
    let mut pieces = Vec::with_capacity(xs.len() * ys.len() * zs.len());
    for &(oz, cz) in &zs {
        for &(oy, cy) in &ys {
            for &(ox, cx) in &xs {
                pieces.push(([ox, oy, oz], [cx, cy, cz]));
            }
        }
    }
    pieces
}

/// Checks a grid against the device's per-dimension limit; the error names the dimension.
pub(crate) fn check_workgroups(workgroups: [u32; 3], max: u32) -> Result<(), WgpuError> {
    for (axis, &n) in AXES.iter().zip(&workgroups) {
        if n == 0 {
            return Err(WgpuError::InvalidDispatch {
                what: format!(
                    "the workgroup count in {axis} is 0 (grid {workgroups:?}); a dispatch \
                     needs at least one workgroup in each dimension"
                ),
            });
        }
        if n > max {
            return Err(WgpuError::InvalidDispatch {
                what: format!(
                    "the workgroup count in {axis} is {n} (grid {workgroups:?}), above the \
                     device's max_compute_workgroups_per_dimension of {max}; split the grid \
                     with split_grid"
                ),
            });
        }
    }
    Ok(())
}

impl WgpuDevice {
    /// Runs `pipeline` over `workgroups` workgroups, with `buffers` bound at bindings
    /// `0..n` and the `launch` bytes where the pipeline's [`super::BindingLayout`] says (a
    /// uniform buffer after them, or immediates). Returns once the work is recorded (it is submitted
    /// with the device's batch, see [`Self::flush`]; work runs in order and
    /// [`WgpuBuffer::read`] waits for it).
    ///
    /// A zero or too large workgroup count, or bindings that do not match the layout,
    /// give [`WgpuError::InvalidDispatch`] and nothing runs.
    pub fn dispatch(
        &self,
        pipeline: &WgpuPipeline,
        buffers: &[&WgpuBuffer],
        launch: Option<&[u8]>,
        workgroups: [u32; 3],
    ) -> Result<(), WgpuError> {
        self.record_and_submit(pipeline, buffers, launch, workgroups, None)
    }

    /// Like [`Self::dispatch`], then waits for the work and returns its GPU time in
    /// milliseconds, measured with timestamps at the start and end of the compute pass.
    /// Returns `Ok(None)` (after running the work) when the device has no
    /// `TIMESTAMP_QUERY` feature.
    pub fn dispatch_timed(
        &self,
        pipeline: &WgpuPipeline,
        buffers: &[&WgpuBuffer],
        launch: Option<&[u8]>,
        workgroups: [u32; 3],
    ) -> Result<Option<f64>, WgpuError> {
        if !self.features().timestamp_query {
            self.dispatch(pipeline, buffers, launch, workgroups)?;
            return Ok(None);
        }
        let (queries, resolved) = self.scoped("creating timestamp queries", || {
            let queries = self.raw().create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("rutile dispatch timing"),
                ty: wgpu::QueryType::Timestamp,
                count: 2,
            });
            let resolved = self.raw().create_buffer(&wgpu::BufferDescriptor {
                label: Some("rutile dispatch timing"),
                size: 2 * wgpu::QUERY_SIZE as u64,
                usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            });
            (queries, resolved)
        })?;
        self.record_and_submit(pipeline, buffers, launch, workgroups, Some((&queries, &resolved)))?;
        let bytes = read_back(self, &resolved, 2 * wgpu::QUERY_SIZE as u64)?;
        let ticks: Vec<u64> = bytes
            .chunks_exact(8)
            .map(|c| u64::from_le_bytes([c[0], c[1], c[2], c[3], c[4], c[5], c[6], c[7]]))
            .collect();
        let [start, end] = ticks[..] else {
            return Err(WgpuError::Map {
                message: format!("read {} bytes of timestamps, expected 16", bytes.len()),
            });
        };
        if end < start {
            return Err(WgpuError::Internal {
                message: format!(
                    "the end timestamp ({}) of a dispatch is before its start ({})",
                    end, start
                ),
            });
        }
        let ns_per_tick = self.queue().get_timestamp_period() as f64;
        Ok(Some((end - start) as f64 * ns_per_tick / 1e6))
    }

    fn record_and_submit(
        &self,
        pipeline: &WgpuPipeline,
        buffers: &[&WgpuBuffer],
        launch: Option<&[u8]>,
        workgroups: [u32; 3],
        timing: Option<(&wgpu::QuerySet, &wgpu::Buffer)>,
    ) -> Result<(), WgpuError> {
        self.check_dispatch(pipeline, buffers, launch, workgroups)?;
        let what = format!("dispatching `{}`", pipeline.entry_point());
        self.scoped(&what, || {
            let uniform_buffer = launch
                .filter(|_| pipeline.layout.uniform_binding().is_some())
                .map(|bytes| {
                    let size = bytes.len().div_ceil(UNIFORM_ALIGN).max(1) * UNIFORM_ALIGN;
                    let buffer = self.raw().create_buffer(&wgpu::BufferDescriptor {
                        label: Some("rutile launch uniforms"),
                        size: size as u64,
                        usage: wgpu::BufferUsages::UNIFORM | wgpu::BufferUsages::COPY_DST,
                        mapped_at_creation: false,
                    });
                    let mut padded = bytes.to_vec();
                    padded.resize(size, 0);
                    self.queue().write_buffer(&buffer, 0, &padded);
                    buffer
                });
            let mut entries: Vec<wgpu::BindGroupEntry> = buffers
                .iter()
                .enumerate()
                .map(|(i, b)| wgpu::BindGroupEntry {
                    binding: i as u32,
                    resource: b.raw().as_entire_binding(),
                })
                .collect();
            if let (Some(buffer), Some(binding)) = (&uniform_buffer, pipeline.layout.uniform_binding()) {
                entries.push(wgpu::BindGroupEntry {
                    binding,
                    resource: buffer.as_entire_binding(),
                });
            }
            let bind_group = self.raw().create_bind_group(&wgpu::BindGroupDescriptor {
                label: Some(pipeline.entry_point()),
                layout: &pipeline.bind_group_layout,
                entries: &entries,
            });
            self.record(|encoder| {
                let mut pass = encoder.begin_compute_pass(&wgpu::ComputePassDescriptor {
                    label: Some(pipeline.entry_point()),
                    timestamp_writes: timing.map(|(queries, _)| wgpu::ComputePassTimestampWrites {
                        query_set: queries,
                        beginning_of_pass_write_index: Some(0),
                        end_of_pass_write_index: Some(1),
                    }),
                });
                pass.set_pipeline(&pipeline.pipeline);
                pass.set_bind_group(0, &bind_group, &[]);
                if let (Some(bytes), LaunchData::Immediates(_)) = (launch, pipeline.layout.launch) {
                    pass.set_immediates(0, bytes);
                }
                let [x, y, z] = workgroups;
                pass.dispatch_workgroups(x, y, z);
                drop(pass);
                if let Some((queries, resolved)) = timing {
                    encoder.resolve_query_set(queries, 0..2, resolved, 0);
                }
            })
        })?
    }

    fn check_dispatch(
        &self,
        pipeline: &WgpuPipeline,
        buffers: &[&WgpuBuffer],
        launch: Option<&[u8]>,
        workgroups: [u32; 3],
    ) -> Result<(), WgpuError> {
        let invalid = |what: String| Err(WgpuError::InvalidDispatch { what });
        if !self.same_device(pipeline.device()) {
            return invalid(format!(
                "the pipeline `{}` belongs to another device",
                pipeline.entry_point()
            ));
        }
        let layout = pipeline.layout;
        if buffers.len() != layout.storage_buffers as usize {
            return invalid(format!(
                "`{}` binds {} storage buffers, {} were given",
                pipeline.entry_point(),
                layout.storage_buffers,
                buffers.len()
            ));
        }
        if let Some(i) = buffers.iter().position(|b| !self.same_device(b.device())) {
            return invalid(format!("storage buffer {i} belongs to another device"));
        }
        let min_size = |binding: usize| pipeline.min_binding_sizes.get(binding).copied().flatten().unwrap_or(0);
        for (i, b) in buffers.iter().enumerate() {
            if b.allocated_bytes() < min_size(i) {
                return invalid(format!(
                    "`{}` binds at least {} bytes at binding {i}; storage buffer {i} has {}",
                    pipeline.entry_point(),
                    min_size(i),
                    b.allocated_bytes()
                ));
            }
        }
        let name = pipeline.entry_point();
        match (layout.launch, launch) {
            (LaunchData::Uniform, None) => {
                return invalid(format!(
                    "`{name}` has a uniform buffer at binding {}, but no launch bytes were given",
                    layout.storage_buffers
                ))
            }
            (LaunchData::Immediates(size), None) => {
                return invalid(format!(
                    "`{name}` reads {size} bytes of immediates, but no launch bytes were given"
                ))
            }
            (LaunchData::None, Some(_)) => {
                return invalid(format!("`{name}` reads no launch data, but launch bytes were given"))
            }
            (LaunchData::Uniform, Some(bytes)) => {
                let limit = self.properties().max_uniform_buffer_binding_size;
                let size = bytes.len().div_ceil(UNIFORM_ALIGN).max(1) * UNIFORM_ALIGN;
                let wanted = min_size(layout.storage_buffers as usize);
                if (size as u64) < wanted {
                    return invalid(format!(
                        "`{name}` reads {wanted} bytes of uniforms at binding {}; {} were given",
                        layout.storage_buffers,
                        bytes.len()
                    ));
                }
                if size as u64 > limit {
                    return invalid(format!(
                        "{} uniform bytes exceed the device's max_uniform_buffer_binding_size \
                         of {limit}",
                        bytes.len()
                    ));
                }
            }
            (LaunchData::Immediates(size), Some(bytes)) => {
                if bytes.len() != size as usize {
                    return invalid(format!(
                        "`{name}` reads {size} bytes of immediates; {} were given",
                        bytes.len()
                    ));
                }
            }
            (LaunchData::None, None) => {}
        }
        check_workgroups(workgroups, self.properties().max_workgroups_per_dimension)
    }
}

impl WgpuDevice {
    /// Runs `f`, which records work on this device, between two GPU timestamps, and
    /// returns the GPU time between them in milliseconds. `Ok(None)`
    /// (after running `f`) when the device cannot write timestamps outside passes.
    pub fn time_queued<E: From<WgpuError>>(&self, f: &mut dyn FnMut() -> Result<(), E>) -> Result<Option<f64>, E> {
        if !self.features().timestamp_query_inside_encoders {
            f()?;
            return Ok(None);
        }
        let size = 2 * wgpu::QUERY_SIZE as u64;
        let (queries, resolved) = self.scoped("creating timestamp queries", || {
            let queries = self.raw().create_query_set(&wgpu::QuerySetDescriptor {
                label: Some("rutile timing"),
                ty: wgpu::QueryType::Timestamp,
                count: 2,
            });
            let resolved = self.raw().create_buffer(&wgpu::BufferDescriptor {
                label: Some("rutile timing"),
                size,
                usage: wgpu::BufferUsages::QUERY_RESOLVE | wgpu::BufferUsages::COPY_SRC,
                mapped_at_creation: false,
            });
            (queries, resolved)
        })?;
        let stamp = |index: u32, resolve: bool| {
            self.record(|encoder| {
                encoder.write_timestamp(&queries, index);
                if resolve {
                    encoder.resolve_query_set(&queries, 0..2, &resolved, 0);
                }
            })
        };
        // Earlier work goes in a submission of its own; `f`'s work is recorded between
        // the two timestamps of one command buffer, so that the time holds no gap between
        // submissions.
        self.flush()?;
        stamp(0, false)?;
        f()?;
        stamp(1, true)?;
        let bytes = read_back(self, &resolved, size)?;
        let tick = |i: usize| u64::from_le_bytes(bytes[8 * i..8 * i + 8].try_into().expect("8 bytes"));
        let ns = tick(1).saturating_sub(tick(0)) as f64 * self.queue().get_timestamp_period() as f64;
        Ok(Some(ns * 1e-6))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Every workgroup of `grid` is covered exactly once, and no piece is too large.
    fn assert_exact_cover(grid: [u32; 3], max: u32) {
        let pieces = split_grid(grid, max);
        let total = grid.iter().map(|&n| n as usize).product::<usize>();
        let mut seen = vec![0u8; total];
        for (offset, count) in &pieces {
            assert!(count.iter().all(|&c| (1..=max.max(1)).contains(&c)), "{count:?}");
            for z in offset[2]..offset[2] + count[2] {
                for y in offset[1]..offset[1] + count[1] {
                    for x in offset[0]..offset[0] + count[0] {
                        let i = (z as usize * grid[1] as usize + y as usize) * grid[0] as usize + x as usize;
                        seen[i] += 1;
                    }
                }
            }
        }
        assert!(seen.iter().all(|&s| s == 1), "grid {grid:?} max {max}");
    }

    #[test]
    fn split_grid_covers_every_program_once() {
        assert_exact_cover([20, 1, 1], 7);
        assert_exact_cover([7, 14, 15], 7);
        assert_exact_cover([1, 1, 1], 7);
        assert_exact_cover([9, 8, 3], 4);
        assert_exact_cover([5, 5, 5], 0);
        assert_eq!(split_grid([20, 1, 1], 7).len(), 3);
        assert_eq!(
            split_grid([20, 1, 1], 7),
            vec![([0, 0, 0], [7, 1, 1]), ([7, 0, 0], [7, 1, 1]), ([14, 0, 0], [6, 1, 1])]
        );
        assert_eq!(split_grid([8, 8, 8], 100), vec![([0, 0, 0], [8, 8, 8])]);
        assert!(split_grid([0, 3, 3], 7).is_empty());
    }

    #[test]
    fn split_grid_handles_the_largest_grids() {
        let pieces = split_grid([u32::MAX, 1, 1], 65535);
        assert_eq!(pieces.len(), (u32::MAX as usize).div_ceil(65535));
        let (offset, count) = *pieces.last().unwrap();
        assert_eq!(offset[0] as u64 + count[0] as u64, u32::MAX as u64);
    }

    #[test]
    fn workgroup_checks_name_the_dimension() {
        assert!(check_workgroups([1, 1, 1], 65535).is_ok());
        let e = check_workgroups([4, 0, 1], 65535).unwrap_err().to_string();
        assert!(e.contains("in y is 0"), "{e}");
        let e = check_workgroups([4, 1, 70000], 65535).unwrap_err().to_string();
        assert!(e.contains("in z is 70000") && e.contains("65535"), "{e}");
    }
}
