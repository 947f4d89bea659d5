//! rutile block IR.
