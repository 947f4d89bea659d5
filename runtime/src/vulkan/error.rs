//! The error type of the wgpu device layer.

/// Everything that can go wrong in the wgpu device layer.
///
/// No function of [`crate::vulkan`] panics on a missing adapter, a rejected shader or a
/// bad dispatch: wgpu's validation errors are caught in error scopes (and by an
/// uncaptured-error handler that replaces wgpu's default panic) and come back as one of
/// these variants.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum WgpuError {
    /// wgpu found no adapter at all (no Vulkan driver, or a driver that reports no device).
    #[error(
        "no wgpu adapter found: install a Vulkan driver (on Linux without a GPU, Mesa's \
         lavapipe: the mesa-vulkan-drivers package)"
    )]
    NoAdapter,

    /// Adapters exist, but not the one that was asked for.
    #[error("wgpu adapter {index} does not exist: {count} adapter(s) found, indices 0..{count}")]
    AdapterNotFound {
        /// The index that was asked for.
        index: usize,
        /// How many adapters were enumerated.
        count: usize,
    },

    /// The adapter refused to open a device.
    #[error("requesting a wgpu device failed: {message}")]
    RequestDevice {
        /// wgpu's message.
        message: String,
    },

    /// wgpu's validation rejected a shader, a pipeline, a bind group or a command.
    #[error("wgpu validation error: {message}")]
    Validation {
        /// wgpu's message, with the chain of causes.
        message: String,
    },

    /// The device ran out of memory.
    #[error("wgpu out of memory: {message}")]
    OutOfMemory {
        /// What was being done.
        message: String,
    },

    /// wgpu or the driver failed internally (e.g. the driver's shader compiler crashed).
    #[error("wgpu internal error: {message}")]
    Internal {
        /// wgpu's message.
        message: String,
    },

    /// A buffer is larger than one storage binding (or one buffer) may be on this device.
    #[error("a buffer of {requested} bytes exceeds the device's {limit_name} of {limit} bytes")]
    BufferTooLarge {
        /// The size that was asked for, in bytes.
        requested: u64,
        /// The device limit, in bytes.
        limit: u64,
        /// Which limit: `max_storage_buffer_binding_size` or `max_buffer_size`.
        limit_name: &'static str,
    },

    /// A host slice does not have the buffer's length.
    #[error("buffer size mismatch: the device buffer holds {expected} bytes, the host data {got}")]
    BufferSize {
        /// Bytes in the device buffer.
        expected: u64,
        /// Bytes in the host data.
        got: u64,
    },

    /// A dispatch was refused before reaching wgpu (bad grid or bindings).
    #[error("invalid dispatch: {what}")]
    InvalidDispatch {
        /// Which dimension or binding is wrong, its value and the limit.
        what: String,
    },

    /// Mapping a buffer for reading failed, or the wait for it did.
    #[error("mapping a wgpu buffer failed: {message}")]
    Map {
        /// wgpu's message.
        message: String,
    },

    /// The operation needs a device feature this device does not have.
    #[error("the wgpu device lacks the feature {feature}")]
    MissingFeature {
        /// The wgpu feature's name, e.g. `TIMESTAMP_QUERY`.
        feature: &'static str,
    },

    /// The device was lost (a driver failure or reset, or it was destroyed): its buffers
    /// and pipelines are gone, and every later call on it fails with this error.
    #[error("the wgpu device was lost ({reason}): its buffers and pipelines can no longer be used")]
    DeviceLost {
        /// Why, as wgpu reports it.
        reason: String,
    },

    /// The Khronos validation layer (on with `RUTILE_VALIDATION=1`) reported an error: a
    /// use of Vulkan the specification forbids, which a driver may still tolerate.
    #[error("the Vulkan validation layer reported an error: {message}")]
    ValidationLayer {
        /// The operation that was running, and the layer's message (with its VUID).
        message: String,
    },

    /// `RUTILE_VALIDATION=1` asked for the Khronos validation layer, and it is not on.
    #[error("RUTILE_VALIDATION=1 asks for the Khronos validation layer, but {reason}")]
    ValidationUnavailable {
        /// Why not: the layer is not installed, or there is no Vulkan.
        reason: String,
    },

    /// An argument that can never be valid (e.g. more storage buffers than the device allows
    /// per stage, or a typed read of a buffer whose length is not a multiple of the type).
    #[error("invalid argument: {what}")]
    InvalidArgument {
        /// What is wrong with it.
        what: String,
    },
}

impl WgpuError {
    /// True for the errors that mean "no usable wgpu adapter here" rather than a bug.
    pub fn is_unavailable(&self) -> bool {
        matches!(self, WgpuError::NoAdapter | WgpuError::AdapterNotFound { .. })
    }

    /// Converts an error caught by a wgpu error scope or by the uncaptured-error handler.
    pub(crate) fn from_wgpu(error: &wgpu::Error) -> Self {
        let message = with_sources(error);
        match error {
            wgpu::Error::OutOfMemory { .. } => WgpuError::OutOfMemory { message },
            wgpu::Error::Validation { .. } => WgpuError::Validation { message },
            wgpu::Error::Internal { .. } => WgpuError::Internal { message },
        }
    }
}

/// An error's message followed by each of its sources on its own line, so that the
/// naga diagnostics under a "shader module is invalid" message are not lost.
pub(crate) fn with_sources(error: &dyn std::error::Error) -> String {
    let mut message = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let text = cause.to_string();
        if !message.contains(&text) {
            message.push_str("\n  caused by: ");
            message.push_str(&text);
        }
        source = cause.source();
    }
    message
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_name_the_problem() {
        let e = WgpuError::AdapterNotFound { index: 3, count: 1 };
        assert!(e.to_string().contains("adapter 3"), "{e}");
        assert!(e.is_unavailable());
        assert!(WgpuError::NoAdapter.to_string().contains("mesa-vulkan-drivers"));
        let e = WgpuError::BufferTooLarge {
            requested: 1 << 31,
            limit: 1 << 27,
            limit_name: "max_storage_buffer_binding_size",
        };
        let s = e.to_string();
        assert!(s.contains("2147483648") && s.contains("134217728"), "{s}");
        assert!(s.contains("max_storage_buffer_binding_size"), "{s}");
        assert!(!e.is_unavailable());
    }

    #[test]
    fn sources_are_kept() {
        #[derive(Debug)]
        struct Inner;
        impl std::fmt::Display for Inner {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("unknown identifier `x`")
            }
        }
        impl std::error::Error for Inner {}
        #[derive(Debug)]
        struct Outer(Inner);
        impl std::fmt::Display for Outer {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str("shader module is invalid")
            }
        }
        impl std::error::Error for Outer {
            fn source(&self) -> Option<&(dyn std::error::Error + 'static)> {
                Some(&self.0)
            }
        }
        let s = with_sources(&Outer(Inner));
        assert!(s.contains("shader module is invalid"), "{s}");
        assert!(s.contains("caused by: unknown identifier `x`"), "{s}");
    }
}
