//! The implementations of [`Device`](crate::Device).

pub mod cpu;
