//! Analyses of block IR: axis facts for the lowering, access extents for launches.

pub mod axis;
pub mod extent;
pub(crate) mod poly;
