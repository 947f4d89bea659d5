//! Prints the op conformance matrix: every op on every element type it accepts, on the
//! interpreter and on every other device present, compared with the interpreter.
//!
//! `cargo run --release --example conformance`; exits with status 1 if any case fails.

use rutile::Device;
use std::sync::Arc;

fn main() {
    let devices: Vec<Arc<dyn Device>> = rutile_examples::gpus::open_gpus();
    let matrix = rutile_examples::conformance::run_matrix(&devices);
    println!("{}", matrix.report());
    if matrix.failures() > 0 {
        std::process::exit(1);
    }
}
