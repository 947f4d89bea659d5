use crate::{BuildError, Kernel, KernelBuilder, ScalarType, Value};

/// The dropout's parameters, in order.
struct Args<'b> {
    x_ptr: Value<'b>,
    output_ptr: Value<'b>,
    n_elements: Value<'b>,
    p: Value<'b>,
    seed: Value<'b>,
}

impl<'b> Args<'b> {
    fn declare(k: &'b KernelBuilder) -> Args<'b> {
        Args {
            x_ptr: k.arg_ptr("x_ptr", ScalarType::F32),
            output_ptr: k.arg_ptr("output_ptr", ScalarType::F32),
            n_elements: k.arg_i32("n_elements"),
            p: k.arg_scalar("p", ScalarType::F32),
            seed: k.arg_i32("seed"),
        }
    }

    /// The dropout of the elements at `offsets` that are below `n_elements`: as the
    /// tutorial's kernel body, `x / (1 - p)` where `rand(seed, offset) > p`, else 0.
    fn drop_out(&self, k: &'b KernelBuilder, offsets: Value<'b>) {
        let mask = offsets.lt(self.n_elements);
        let x = k.load_masked(self.x_ptr + offsets, mask, 0);
        let random = k.rand(self.seed, offsets);
        let x_keep = random.gt(self.p);
        let output = k.where_(x_keep, x.fdiv(1.0f32 - self.p, false), 0.0f32);
        k.store_masked(self.output_ptr + offsets, output, mask);
    }
}

/// Low-memory dropout, as Triton's tutorial `_seeded_dropout`: instead of a stored mask,
/// each element's keep decision is `tl.rand(seed, offset) > p`, recomputed from the seed
/// whenever it is needed (the backward pass uses the same seed). Kept elements are scaled
/// by `1 / (1 - p)`, dropped ones are 0.
///
/// Parameters: `x_ptr`, `output_ptr` (f32 pointers), `n_elements` (i32), `p` (f32, the drop
/// probability), `seed` (i32). Grid: `cdiv(n_elements, block)`. The division `x / (1 - p)`
/// is Triton's `/` for f32, within 2 ulp (`fdiv` without IEEE rounding): the correctly
/// rounded one is a dozen instructions per element on NVIDIA GPUs, in a kernel whose
/// Philox rounds already make it nearly as much compute as memory.
pub fn seeded_dropout(block: u32) -> Result<Kernel, BuildError> {
    Kernel::build("_seeded_dropout", |k| {
        let pid = k.program_id(0);
        let offsets = pid * block + k.arange(0, block as i32);
        Args::declare(k).drop_out(k, offsets);
    })
}

/// The seeded dropout whose programs walk the blocks `program_id, program_id +
/// num_programs, ...` in a loop pipelined `num_stages` deep (`for_range_staged`): on a
/// device with asynchronous copies the next blocks' `x` are copied in while this one's
/// Philox rounds run, so that the loads in flight no longer depend on how many programs
/// share a multiprocessor. Each element's result is [`seeded_dropout`]'s, bit for bit.
///
/// Parameters as [`seeded_dropout`]'s. Grid: any number of programs (as many as the device
/// holds at once, never more than `cdiv(n_elements, block)`).
pub fn seeded_dropout_walk(block: u32, num_stages: u32) -> Result<Kernel, BuildError> {
    Kernel::build("_seeded_dropout_walk", |k| {
        let args = Args::declare(k);
        let blocks = args.n_elements.cdiv(block as i32);
        let lanes = k.arange(0, block as i32);
        k.for_range_staged(k.program_id(0), blocks, k.num_programs(0), num_stages, &[], |b, _| {
            args.drop_out(k, b * block + lanes);
            vec![]
        });
    })
}
