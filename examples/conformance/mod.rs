//! The op conformance matrix: every op of the kernel language on every element type it
//! accepts, run on the interpreter (the reference) and on every other device present, and
//! compared element by element.
//!
//! A case is one op on one element type at one shape: a kernel, its input buffers (random,
//! with the special values of the type), and a comparison rule. [`run_matrix`] runs every
//! case on every device and returns a [`Matrix`] of outcomes: pass, FAIL, UNSUPPORTED (the
//! device says it cannot run the op or type: reported, not a failure) or KNOWN (a mismatch
//! already understood and listed in the case table with its reason).
//!
//! Comparison rules:
//! * integer, bit and comparison ops, casts, bitcasts, `minimum`/`maximum`, `floor`, `ceil`,
//!   `abs`, `neg`, loads and stores: bit-exact (every NaN matches every NaN);
//! * IEEE-exact float ops (`add sub mul div sqrt fma`, and `rem`, which the PTX backend
//!   computes exactly): exact, except where a backend documents otherwise ([`FLOAT_BOUNDS`]);
//! * `div_full` (division within 2 ulp, `fdiv(.., false)`) and transcendental functions:
//!   within the documented bounds of [`FLOAT_BOUNDS`];
//! * float reductions: within `n·eps·Σ|x|` (the order of the additions differs);
//! * float scans (`cumsum`): each element within `n·eps·Σ|x|` of its lane (`Rule::Lanes`);
//!   `sort`, `gather`, `histogram`, integer scans and exact products: bit-exact;
//! * `cluster_reduce`, `cluster_reduce_n`: bit-exact (float sums add integers, exact in any order;
//!   the pairs compose small integers);
//! * atomics: the final memory against the interpreter's (exact, or the reduction tolerance
//!   for `f32` add), and the old values returned checked for consistency (`xchg`, `cas`).
//!
//! On Vulkan devices the comparison also accepts what the Vulkan specification allows
//! ("Precision and Operation of SPIR-V Instructions"): results computed with `f16`/`f32`
//! subnormals flushed to zero, and the allowances of the private `vulkan_allowances`
//! module, the one place that loosens it: the half-precision `sin`/`cos` bound, `minimum`/
//! `maximum` of two subnormals giving either operand (pass), and `div`/`div_full` by a divisor outside
//! the specification's range (KNOWN, element by element: any other mismatch still fails).

use rutile::ir::BuildError;
use rutile::{Arg, Backend, CpuDevice, Device, Error, Kernel, KernelBuilder, LaunchConfig, ScalarType, Value};
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::sync::Arc;

use ScalarType::*;

/// The element types of the matrix (booleans are covered through comparisons and masks).
pub const DTYPES: [ScalarType; 17] = [
    I8, I16, I32, I64, U8, U16, U32, U64, F8E4M3, F8E5M2, F8E4M3B15, F8E4M3Fnuz, F8E5M2Fnuz, F16, BF16, F32, F64,
];

/// Elements per program of the element-wise kernels.
const BLOCK: i32 = 256;
/// The ragged length: four programs, the last one partly masked.
const RAGGED: usize = 1000;

mod block_ptr_cases;
mod bounds;
mod cases;
mod cluster_cases;
mod inputs;
mod join_cases;
mod math_cases;
mod random_cases;
mod rounded_cases;
mod run;
mod scans;
mod values;

use self::scans::scan_cases;
pub use self::{bounds::*, cases::*, inputs::*, rounded_cases::rounded_cases, run::*, values::*};
