//! rutile: the crate users depend on.
