//! Lists every device rutile can use, with its properties:
//!
//!     cargo run --release --example devices

fn main() {
    for listing in rutile::list_devices() {
        match listing.device {
            Ok(d) => println!("[{}] {}\n", listing.id, d.properties()),
            Err(e) => println!("[{}] unavailable: {e}\n", listing.id),
        }
    }
    match rutile::default_device() {
        Ok(d) => println!("default device: {}", d.id()),
        Err(e) => println!("default device: none ({e})"),
    }
}
