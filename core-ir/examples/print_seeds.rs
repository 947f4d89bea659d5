//! Prints the block IR of the seed kernels.
use rutile_ir::seeds;
fn main() {
    let add = seeds::vector_add(rutile_ir::ScalarType::F32, 1024).unwrap();
    println!("{add}");
    println!("{}", seeds::softmax_persistent(1024).unwrap());
    let mut meta = seeds::MatmulMeta::fp16(64, 64, 32);
    meta.activation = Some(seeds::Activation::LeakyRelu);
    match seeds::matmul(&meta) {
        Ok(k) => println!("{k}"),
        Err(e) => println!("{e}"),
    }
}
