//! The implementations of [`Device`](crate::Device).

use crate::error::{Error, Result};

pub mod cpu;
pub mod cuda;
pub mod vulkan;
mod vulkan_print;

/// Whether environment variable `name` leaves a feature on (anything but `0`, or unset):
/// the CUDA runtime's switches, and `RUTILE_WIDE_PRODUCTS` and `RUTILE_MASKS_BY_RUNS`,
/// which both backends read.
pub(crate) fn env_flag(name: &str) -> bool {
    std::env::var(name).map_or(true, |v| v.trim() != "0")
}

/// Whether environment variable `name` turns on a feature that is off by default (`1`).
pub(crate) fn env_opt_in(name: &str) -> bool {
    std::env::var(name).is_ok_and(|v| v.trim() == "1")
}

/// What environment variable `name` says of a feature whose default depends on the launch:
/// `None` where it is unset, off for `0`, on for anything else.
pub(crate) fn env_override(name: &str) -> Option<bool> {
    std::env::var(name).ok().map(|v| v.trim() != "0")
}

/// The count environment variable `variable` gives, `None` where it is unset (see
/// [`parse_count`]).
pub(crate) fn env_count(
    variable: &'static str,
    range: std::ops::RangeInclusive<u32>,
    what: &str,
) -> Result<Option<u32>> {
    parse_count(variable, std::env::var(variable).ok().as_deref(), range, what)
}

/// The count `value` of environment variable `variable` (`None` where unset): an integer
/// in `range`, or an error saying it takes `what` in that range and what came.
pub(crate) fn parse_count(
    variable: &'static str,
    value: Option<&str>,
    range: std::ops::RangeInclusive<u32>,
    what: &str,
) -> Result<Option<u32>> {
    let Some(v) = value else {
        return Ok(None);
    };
    match v.trim().parse::<u32>() {
        Ok(k) if range.contains(&k) => Ok(Some(k)),
        _ => Err(Error::Environment {
            variable,
            message: format!("takes {what}, {} to {}; got {v:?}", range.start(), range.end()),
        }),
    }
}

/// `RUTILE_SUM_CHAINS=k` (both backends): a thread's elements of a `sum` folded into k
/// interleaved partials (`Target::sum_chains`), 1 (in order) where unset.
pub(crate) fn sum_chains() -> Result<u32> {
    Ok(env_count(
        "RUTILE_SUM_CHAINS",
        1..=32,
        "into how many interleaved partials a thread folds a sum",
    )?
    .unwrap_or(1))
}
