//! Shared helpers of the examples: random inputs, CPU references and checks, running the
//! seed tutorials on a device, and their performance sweeps (`sweeps`). The `tutorials` example is the main entry point; the
//! integration tests run the same functions.

pub mod bench;
pub mod check;
pub mod conformance;
pub mod gpus;
pub mod rng;
pub mod sweeps;
pub mod tutorials;
