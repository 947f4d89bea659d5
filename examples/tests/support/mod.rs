//! Helpers shared by the device tests.

pub mod attention;
