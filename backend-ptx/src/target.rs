//! The GPU generation and PTX ISA version a kernel is generated for.

/// What [`crate::emit`] generates code for: `.target sm_{sm}` and `.version {major}.{minor}`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct PtxTarget {
    /// The SM version, `10 * major + minor` of the compute capability (70, 75, 80, 86, 89,
    /// 90, ...). The generator supports 70 and above.
    pub sm: u32,
    /// The PTX ISA version written in the header, `(major, minor)`; at least 7.0.
    pub ptx_version: (u32, u32),
    /// The most registers a thread may use (`.maxnreg`, Triton's `maxnreg`), 16 to 255:
    /// fewer registers a thread let more programs share a multiprocessor, at the price of
    /// spills where the kernel needs more. `None`: as many as `ptxas` likes (at most what
    /// `.maxntid` threads leave each).
    pub max_registers: Option<u32>,
    /// Pack the 16-bit halves of a warpgroup MMA group's register A operands into their
    /// 32-bit pairs before the group's `wgmma.fence` rather than right before each MMA.
    /// Registers written between the fence and an MMA make `ptxas` insert a
    /// `warpgroup.arrive` before it (its note C7519), which waits for the MMAs issued
    /// before; packed ahead, the group issues without them, but `ptxas` 12.9 gave such
    /// kernels 2 to 28 more registers (docs/performance.md, "What `ptxas` inserts between
    /// the tutorial walk's `P V` MMAs"). Off by default: on an H200 it made attention 2–6%
    /// slower ("The switches measured").
    pub pack_before_fence: bool,
    /// Take `umulhi(a, b)` and `a * b` of the same 32-bit registers from one `mul.wide.u32`
    /// (`rutile_ir::thread::product_pairs`): one `IMAD.WIDE.U32` where two multiplies were,
    /// which is most of Philox's work. On by default (the seeded dropout 15% faster on an
    /// H200); off only to time what it saves.
    pub wide_products: bool,
    /// Convert fp8 values with sm_89's `cvt` to and from `e4m3x2`/`e5m2x2` where the target
    /// has it. Before sm_89 (or with this off) the same values come from integer
    /// instructions, a dozen or so a conversion. On by default; off to test and time the
    /// older GPUs' path on a newer one.
    pub native_fp8_conversions: bool,
}

impl PtxTarget {
    /// The register limits [`PtxTarget::max_registers`] accepts: below 16 `ptxas` cannot
    /// hold a kernel's addresses and indices without spilling nearly everything, and no
    /// NVIDIA GPU gives a thread more than 255.
    pub const MAX_REGISTERS: std::ops::RangeInclusive<u32> = 16..=255;

    /// The target for a device of compute capability `major.minor`, with the oldest PTX ISA
    /// version that the GPU needs and this generator's output uses (7.0 features: `min.NaN`,
    /// bf16 conversions), so that the module loads on as many drivers as possible:
    ///
    /// | sm              | PTX ISA | oldest driver |
    /// |-----------------|---------|---------------|
    /// | 70 ... 89       | 7.8     | CUDA 11.8     |
    /// | 90              | 8.0     | CUDA 12.0     |
    /// | 100, 101        | 8.6     | CUDA 12.7     |
    /// | 120             | 8.7     | CUDA 12.8     |
    /// | 103, 121, other | 8.8     | CUDA 12.9     |
    ///
    /// (7.8 is the first version that knows sm_89; using it for every older GPU keeps one
    /// version across the CUDA 11.8+ drivers and `ptxas` 12.x. A kernel converting fp8
    /// values with `cvt` says 8.1 on sm_89, the first version with them: CUDA 12.1.)
    pub fn from_compute_capability(major: u32, minor: u32) -> PtxTarget {
        let sm = major * 10 + minor;
        let ptx_version = match sm {
            0..=89 => (7, 8),
            90 => (8, 0),
            100 | 101 => (8, 6),
            120 => (8, 7),
            _ => (8, 8),
        };
        PtxTarget {
            sm,
            ptx_version,
            max_registers: None,
            pack_before_fence: false,
            wide_products: true,
            native_fp8_conversions: true,
        }
    }

    /// This target with at most `count` registers a thread ([`PtxTarget::max_registers`]).
    pub fn max_registers(self, count: Option<u32>) -> PtxTarget {
        PtxTarget {
            max_registers: count,
            ..self
        }
    }

    /// This target packing A operands before the fence ([`PtxTarget::pack_before_fence`]).
    pub fn pack_before_fence(self, on: bool) -> PtxTarget {
        PtxTarget {
            pack_before_fence: on,
            ..self
        }
    }

    /// This target taking both halves of a product from one instruction or not
    /// ([`PtxTarget::wide_products`]).
    pub fn wide_products(self, on: bool) -> PtxTarget {
        PtxTarget {
            wide_products: on,
            ..self
        }
    }

    /// This target converting fp8 values with sm_89's `cvt` where it has it, or from integer
    /// instructions ([`PtxTarget::native_fp8_conversions`]).
    pub fn native_fp8_conversions(self, on: bool) -> PtxTarget {
        PtxTarget {
            native_fp8_conversions: on,
            ..self
        }
    }

    /// `sm_80` and later: `min.NaN`/`max.NaN`, bf16 conversions and `fma.rn.bf16`.
    pub(crate) fn has_sm80(&self) -> bool {
        self.sm >= 80
    }
    /// fp8 conversions by `cvt` to and from `e4m3x2`/`e5m2x2`: `sm_89` and later, unless
    /// [`PtxTarget::native_fp8_conversions`] is off.
    pub(crate) fn has_native_fp8(&self) -> bool {
        self.sm >= 89 && self.native_fp8_conversions
    }
    /// `sm_90` and later: `atom.add.noftz.bf16`.
    pub(crate) fn has_sm90(&self) -> bool {
        self.sm >= 90
    }
}

impl std::fmt::Display for PtxTarget {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "sm_{} (PTX {}.{})", self.sm, self.ptx_version.0, self.ptx_version.1)
    }
}
