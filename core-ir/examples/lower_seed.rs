//! Prints the per-thread IR of a seed kernel: `cargo run -p rutile-ir --example lower_seed -- add|softmax|persistent|rows`.
use rutile_ir::{
    lower, seeds,
    target::{Specialization, Target},
    ScalarType,
};
fn main() {
    let which = std::env::args().nth(1).unwrap_or_else(|| "add".into());
    let k = match which.as_str() {
        "softmax" => seeds::softmax(1024).unwrap(),
        "persistent" => seeds::softmax_persistent(1024).unwrap(),
        "rows" => seeds::softmax_rows(4, 1024).unwrap(),
        _ => seeds::vector_add(ScalarType::F32, 1024).unwrap(),
    };
    let t = Target::nvidia(4, 48 * 1024);
    match lower::lower(&k, &t, &Specialization::all(k.params.len())) {
        Ok(tk) => println!("{tk}"),
        Err(e) => println!("error: {e}"),
    }
}
