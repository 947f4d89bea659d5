//! The Khronos validation layer under rutile's Vulkan devices, on request.
//!
//! `RUTILE_VALIDATION=1` creates the process's wgpu instance with wgpu's `VALIDATION` and
//! `DEBUG` flags, which enable `VK_LAYER_KHRONOS_validation` and `VK_EXT_debug_utils`, and
//! adds a debug-utils messenger of rutile's to that instance. wgpu's own messenger only
//! logs what the layer says (through the `log` crate, where nothing may be listening);
//! rutile's keeps every error, and the next call of the device layer on any wgpu device
//! returns the oldest one as [`WgpuError::ValidationLayer`], naming the operation that was
//! running when the layer reported it. So a Vulkan usage error that a driver tolerates
//! fails the program (or test) that caused it, with the layer's message.
//!
//! The messenger sits on the instance, so it also sees rutile's raw Vulkan calls (the
//! properties read through wgpu's handles, the register-count pipelines of `statistics`):
//! layers dispatch every call made on the instance and on the devices created from it.
//!
//! When the variable asks for validation and the layer is not installed, or the instance
//! lacks `VK_EXT_debug_utils`, opening a wgpu device fails with
//! [`WgpuError::ValidationUnavailable`] rather than running unvalidated.

use std::collections::VecDeque;
use std::ffi::{c_void, CStr};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Mutex, OnceLock};

use super::error::WgpuError;

/// The environment variable that turns the validation layer on: `1` (any other value, or
/// none, leaves it off). Read once, when the process's wgpu instance is created.
pub const VALIDATION_ENV: &str = "RUTILE_VALIDATION";

/// The layer's name, as the Vulkan loader knows it.
const LAYER: &CStr = c"VK_LAYER_KHRONOS_validation";

/// Errors kept for the next call of the device layer; later ones are counted only.
const MAX_PENDING: usize = 16;

/// Messages that are the layer's mistakes, not rutile's: the message id, a piece of its
/// text, and why. Each is counted in [`ValidationReport::ignored`] and explained once on
/// stderr.
const FALSE_POSITIVES: [(&str, &str, &str); 1] = [(
    "UNASSIGNED-CoreValidation-Shader-InconsistentSpirv",
    "Invalid source language operand: 10",
    "SPIR-V's source language 10 is WGSL, which layers older than 1.3.250 do not know; wgpu \
     declares it in the debug information of shaders made from WGSL, which the DEBUG flag \
     (needed for VK_EXT_debug_utils) turns on",
)];

/// What the validation layer has said in this process.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ValidationReport {
    /// [`VALIDATION_ENV`] asked for the layer.
    pub requested: bool,
    /// The layer is on, with rutile's messenger: its name, description and version; or
    /// why not (not requested, not installed, no Vulkan).
    pub layer: Result<String, String>,
    /// Errors the layer reported since the process started (each also came back as a
    /// [`WgpuError::ValidationLayer`], unless several came before the next call).
    pub errors: u64,
    /// Warnings it reported (printed on stderr; they fail nothing).
    pub warnings: u64,
    /// Errors that are known mistakes of the layer's (see the stderr note), ignored.
    pub ignored: u64,
}

/// Whether [`VALIDATION_ENV`] asks for validation.
pub fn requested() -> bool {
    std::env::var(VALIDATION_ENV).as_deref() == Ok("1")
}

/// The validation layer's state and counts so far. Creates the wgpu instance if no call
/// did yet, so that the answer is the one devices get.
pub fn validation_report() -> ValidationReport {
    let _ = super::adapters::instance();
    ValidationReport {
        requested: requested(),
        layer: STATUS
            .get()
            .cloned()
            .unwrap_or_else(|| Err("no wgpu instance was created".to_string())),
        errors: ERRORS.load(Ordering::Relaxed),
        warnings: WARNINGS.load(Ordering::Relaxed),
        ignored: IGNORED.load(Ordering::Relaxed),
    }
}

/// The layer's state, set once when the instance is created.
static STATUS: OnceLock<Result<String, String>> = OnceLock::new();
static ERRORS: AtomicU64 = AtomicU64::new(0);
static WARNINGS: AtomicU64 = AtomicU64::new(0);
static IGNORED: AtomicU64 = AtomicU64::new(0);
/// rutile's messenger is on the instance.
static ACTIVE: AtomicBool = AtomicBool::new(false);
/// Errors not yet returned by a call.
static PENDING: Mutex<Pending> = Mutex::new(Pending::new());

/// Errors not yet returned by a call, oldest first (each with the operation it was
/// reported during, where that is known already), and how many more came past
/// [`MAX_PENDING`].
struct Pending {
    errors: VecDeque<(Option<String>, String)>,
    dropped: u64,
}

impl Pending {
    const fn new() -> Pending {
        Pending {
            errors: VecDeque::new(),
            dropped: 0,
        }
    }

    fn push(&mut self, message: String) {
        if self.errors.len() < MAX_PENDING {
            self.errors.push_back((None, message));
        } else {
            self.dropped += 1;
        }
    }

    /// Names `what` as the operation of the errors that have none yet.
    fn attribute(&mut self, what: &str) {
        for (operation, _) in &mut self.errors {
            operation.get_or_insert_with(|| what.to_string());
        }
    }

    /// The oldest error as an error naming its operation (`what` unless it has one), with
    /// a count of the others, which are forgotten.
    fn take(&mut self, what: &str) -> Result<(), WgpuError> {
        let Some((operation, first)) = self.errors.pop_front() else {
            return Ok(());
        };
        let what = operation.as_deref().unwrap_or(what);
        let more = self.errors.len() as u64 + self.dropped;
        self.errors.clear();
        self.dropped = 0;
        let also = match more {
            0 => String::new(),
            1 => " (and 1 more error, printed on stderr)".to_string(),
            n => format!(" (and {n} more errors, printed on stderr)"),
        };
        Err(WgpuError::ValidationLayer {
            message: format!("{what}: {first}{also}"),
        })
    }
}

/// The instance flags for the process's instance: `base`, with validation and debug
/// information when [`VALIDATION_ENV`] asks for them.
pub(crate) fn instance_flags(base: wgpu::InstanceFlags) -> wgpu::InstanceFlags {
    if requested() {
        // DEBUG is what makes wgpu enable VK_EXT_debug_utils, which the messenger needs.
        base | wgpu::InstanceFlags::VALIDATION | wgpu::InstanceFlags::DEBUG
    } else {
        base
    }
}

/// Adds rutile's messenger to the process's instance when validation was asked for, and
/// records whether the layer is on. Called once, right after the instance is created.
pub(crate) fn attach(instance: &wgpu::Instance) {
    let status = if requested() {
        attach_messenger(instance)
    } else {
        Err(format!("{VALIDATION_ENV} is not 1"))
    };
    ACTIVE.store(status.is_ok(), Ordering::Relaxed);
    let _ = STATUS.set(status);
}

/// [`WgpuError::ValidationUnavailable`] when validation was asked for and is not on.
pub(crate) fn check_available() -> Result<(), WgpuError> {
    if !requested() {
        return Ok(());
    }
    match STATUS.get() {
        Some(Ok(_)) => Ok(()),
        Some(Err(reason)) => Err(WgpuError::ValidationUnavailable { reason: reason.clone() }),
        None => Err(WgpuError::ValidationUnavailable {
            reason: "no wgpu instance was created".to_string(),
        }),
    }
}

/// The oldest error the layer reported since the last call, as an error naming `what` (the
/// operation of the device layer that was running); the others reported with it are
/// counted in its message.
pub(crate) fn take_error(what: &str) -> Result<(), WgpuError> {
    // Every call of the device layer comes here: without the messenger, nothing to lock.
    if !ACTIVE.load(Ordering::Relaxed) {
        return Ok(());
    }
    lock_pending().take(what)
}

/// Whether the validation layer's messenger is attached (its errors then come back with
/// the next call of the device layer, from any thread).
pub(crate) fn active() -> bool {
    ACTIVE.load(Ordering::Relaxed)
}

/// Names `what` as the operation during which the errors not yet returned were reported,
/// for work that cannot return them itself (they come back with the next call).
pub(crate) fn attribute_pending(what: &str) {
    lock_pending().attribute(what);
}

fn lock_pending() -> std::sync::MutexGuard<'static, Pending> {
    PENDING.lock().unwrap_or_else(|poisoned| poisoned.into_inner())
}

#[cfg(all(not(target_arch = "wasm32"), not(target_vendor = "apple")))]
fn attach_messenger(instance: &wgpu::Instance) -> Result<String, String> {
    use ash::vk;
    // SAFETY: the hal instance is only used to create a messenger on it, which lives as
    // long as the instance (the process's, never destroyed).
    let Some(hal) = (unsafe { instance.as_hal::<wgpu::hal::api::Vulkan>() }) else {
        return Err("wgpu has no Vulkan instance here (no Vulkan loader)".to_string());
    };
    let shared = hal.shared_instance();
    // SAFETY: a plain enumeration through the loader wgpu opened.
    let layers = unsafe { shared.entry().enumerate_instance_layer_properties() }
        .map_err(|e| format!("listing the Vulkan layers failed: {e}"))?;
    let Some(layer) = layers.iter().find(|l| l.layer_name_as_c_str() == Ok(LAYER)) else {
        return Err(format!(
            "the Khronos validation layer ({}) is not installed (Debian and Ubuntu: the \
             vulkan-validationlayers package)",
            LAYER.to_string_lossy()
        ));
    };
    if !shared.extensions().contains(&ash::ext::debug_utils::NAME) {
        return Err("the Vulkan instance has no VK_EXT_debug_utils, which the messages need".to_string());
    }
    let debug_utils = ash::ext::debug_utils::Instance::new(shared.entry(), shared.raw_instance());
    let info = vk::DebugUtilsMessengerCreateInfoEXT::default()
        .message_severity(vk::DebugUtilsMessageSeverityFlagsEXT::ERROR | vk::DebugUtilsMessageSeverityFlagsEXT::WARNING)
        .message_type(
            vk::DebugUtilsMessageTypeFlagsEXT::GENERAL
                | vk::DebugUtilsMessageTypeFlagsEXT::VALIDATION
                | vk::DebugUtilsMessageTypeFlagsEXT::PERFORMANCE,
        )
        .pfn_user_callback(Some(on_message));
    // SAFETY: a valid create info on a live instance; the messenger is never destroyed,
    // as the instance is not.
    unsafe { debug_utils.create_debug_utils_messenger(&info, None) }
        .map_err(|e| format!("creating a debug-utils messenger failed: {e}"))?;
    let version = layer.spec_version;
    Ok(format!(
        "{} {}.{}.{} ({})",
        LAYER.to_string_lossy(),
        vk::api_version_major(version),
        vk::api_version_minor(version),
        vk::api_version_patch(version),
        layer
            .description_as_c_str()
            .map(CStr::to_string_lossy)
            .unwrap_or_default()
    ))
}

#[cfg(any(target_arch = "wasm32", target_vendor = "apple"))]
fn attach_messenger(_instance: &wgpu::Instance) -> Result<String, String> {
    Err("the Khronos validation layer is a Vulkan layer; this platform's wgpu backend is not Vulkan".to_string())
}

/// The messenger's callback: keeps errors for the next call, counts and prints warnings.
/// It must not unwind into the driver, and always lets the call go on (`VK_FALSE`, as the
/// specification asks of applications).
#[cfg(all(not(target_arch = "wasm32"), not(target_vendor = "apple")))]
unsafe extern "system" fn on_message(
    severity: ash::vk::DebugUtilsMessageSeverityFlagsEXT,
    _types: ash::vk::DebugUtilsMessageTypeFlagsEXT,
    data: *const ash::vk::DebugUtilsMessengerCallbackDataEXT<'_>,
    _user: *mut c_void,
) -> ash::vk::Bool32 {
    use ash::vk;
    let _ = std::panic::catch_unwind(|| {
        // SAFETY: the layer passes valid callback data for the duration of the call.
        let Some(data) = (unsafe { data.as_ref() }) else {
            return;
        };
        // SAFETY: as above; the strings are NUL-terminated or null.
        let id = unsafe { data.message_id_name_as_c_str() }
            .map(CStr::to_string_lossy)
            .unwrap_or_default();
        // SAFETY: as above.
        let text = unsafe { data.message_as_c_str() }
            .map(CStr::to_string_lossy)
            .unwrap_or_default();
        if let Some((_, piece, why)) = FALSE_POSITIVES
            .iter()
            .find(|(false_id, piece, _)| id == *false_id && text.contains(piece))
        {
            if IGNORED.fetch_add(1, Ordering::Relaxed) == 0 {
                eprintln!("Vulkan validation: ignoring the layer's {id} errors \"{piece}\": {why}");
            }
            return;
        }
        let message = if id.is_empty() || text.contains(id.as_ref()) {
            text.into_owned()
        } else {
            format!("[{id}] {text}")
        };
        if severity.contains(vk::DebugUtilsMessageSeverityFlagsEXT::ERROR) {
            record_error(message);
        } else {
            WARNINGS.fetch_add(1, Ordering::Relaxed);
            eprintln!("Vulkan validation warning: {message}");
        }
    });
    vk::FALSE
}

/// Counts an error, prints it (another thread's call may be the one that returns it) and
/// keeps it for the next call.
fn record_error(message: String) {
    ERRORS.fetch_add(1, Ordering::Relaxed);
    eprintln!("Vulkan validation error: {message}");
    lock_pending().push(message);
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Errors come back once, oldest first, naming the operation and how many more came.
    #[test]
    fn pending_errors_are_taken_once() {
        let mut pending = Pending::new();
        assert!(pending.take("anything").is_ok());
        pending.push("[VUID-x] first".into());
        pending.push("[VUID-y] second".into());
        let e = pending.take("creating a pipeline").unwrap_err();
        assert_eq!(
            e.to_string(),
            "the Vulkan validation layer reported an error: creating a pipeline: [VUID-x] first (and 1 more \
             error, printed on stderr)"
        );
        assert!(pending.take("anything").is_ok());
        for i in 0..MAX_PENDING + 3 {
            pending.push(format!("error {i}"));
        }
        let e = pending.take("a dispatch").unwrap_err().to_string();
        assert!(
            e.ends_with("a dispatch: error 0 (and 18 more errors, printed on stderr)"),
            "{e}"
        );
        // Errors of work that could not return them keep the name of that work.
        pending.push("early".into());
        pending.attribute("reading a register count");
        pending.push("late".into());
        let e = pending.take("a copy").unwrap_err().to_string();
        assert!(
            e.ends_with("reading a register count: early (and 1 more error, printed on stderr)"),
            "{e}"
        );
    }
}
