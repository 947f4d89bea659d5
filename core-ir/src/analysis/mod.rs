//! Analyses of block IR that the lowering uses.

pub mod axis;
