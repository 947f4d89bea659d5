//! The implementations of [`Device`](crate::Device).

use crate::error::{Error, Result};

pub mod cpu;
pub mod cuda;
pub mod vulkan;
mod vulkan_print;

/// Whether on/off switch `name` leaves a feature on (`1`, or unset): every on/off switch
/// of both backends is read through this or [`env_opt_in`], so that a value other than `0`
/// or `1` is an error (see [`parse_switch`]).
pub(crate) fn env_flag(name: &'static str) -> Result<bool> {
    Ok(env_switch(name)?.unwrap_or(true))
}

/// Whether on/off switch `name` turns on a feature that is off by default (`1`).
pub(crate) fn env_opt_in(name: &'static str) -> Result<bool> {
    Ok(env_switch(name)?.unwrap_or(false))
}

/// What on/off switch `name` says (`None` where it is unset): for a feature whose default
/// depends on the launch.
pub(crate) fn env_switch(name: &'static str) -> Result<Option<bool>> {
    parse_switch(name, std::env::var(name).ok().as_deref())
}

/// The setting `value` of on/off switch `variable`: `None` where unset or empty, `0` off,
/// `1` on, and any other value an error naming the variable and what it takes, so that a
/// switch set to `off` or `false` is not taken silently for one way or the other.
pub(crate) fn parse_switch(variable: &'static str, value: Option<&str>) -> Result<Option<bool>> {
    match value.map(str::trim) {
        None | Some("") => Ok(None),
        Some("0") => Ok(Some(false)),
        Some("1") => Ok(Some(true)),
        Some(v) => Err(Error::Environment {
            variable,
            message: format!("takes 0 (off) or 1 (on); got {v:?}"),
        }),
    }
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
