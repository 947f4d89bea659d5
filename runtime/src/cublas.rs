//! cuBLAS, loaded at run time, as the baseline rutile's matmul is measured against.
//!
//! Like the CUDA driver, cuBLAS is opened when first asked for, so rutile builds and runs
//! without it; where it cannot be found, [`library`] and [`Cublas::new`] return an `Err`
//! saying so and how to point rutile at it (never a panic). It is looked for in this order:
//!
//! 1. `RUTILE_CUBLAS` ([`CUBLAS_ENV`]): the path of a `libcublas.so.N` (or of the folder
//!    holding it). When set, it is the only place looked at.
//! 2. The dynamic loader's search path (`LD_LIBRARY_PATH`, the system's library cache) by
//!    the standard names, `libcublas.so.13`, `.so.12`, `.so.11`, `libcublas.so` (the
//!    newest the driver can run first).
//! 3. The CUDA toolkit: `$CUDA_HOME/lib64`, `$CUDA_PATH/lib64`, `/usr/local/cuda/lib64`.
//! 4. The `nvidia-cublas` wheels of any `python3` or `python` on `PATH`
//!    (`site-packages/nvidia/cublas/lib`, `nvidia/cu13/lib`, ...; PyTorch's CUDA wheels
//!    bring them along).
//!
//! Where a file is found by path, `libcublasLt` is loaded first from the same folder, so
//! that cuBLAS finds it without `LD_LIBRARY_PATH`.
//!
//! [`Cublas`] runs on a [`CudaGpu`]'s context and stream, so its work is ordered with the
//! device's launches and timed by the device's events ([`crate::bench::do_bench`]):
//!
//! ```no_run
//! use half::f16;
//! use rutile::cublas::Cublas;
//! use rutile::{CudaGpu, DeviceExt};
//! # fn main() -> rutile::Result<()> {
//! let gpu = CudaGpu::open(0)?;
//! let cublas = Cublas::new(&gpu)?; // an Err if cuBLAS is not installed
//! let (m, n, k) = (256, 128, 64);
//! let a = gpu.upload(&vec![f16::ONE; m * k])?;
//! let b = gpu.upload(&vec![f16::ONE; k * n])?;
//! let c = gpu.zeros::<f32>(m * n)?;
//! cublas.matmul(&a, &b, &c, (m, n, k))?; // C = A @ B, all row-major
//! assert_eq!(gpu.download(&c)?[0], 64.0);
//! # Ok(()) }
//! ```
//!
//! cudarc's own cuBLAS bindings are not used: their loader tries a fixed list of names
//! derived from the CUDA version rutile's bindings are pinned to (12.8: `.so.12` and
//! older, never `.so.13`), cannot be given a path, and panics where it finds nothing.

use crate::backends::cuda::CudaGpu;
use crate::buffer::{Buffer, DeviceBuffer, Element};
use crate::cuda::{CudaBuffer, CudaDevice};
use crate::device::Device;
use crate::error::{Error, Result};
use libloading::Library;
use rutile_ir::ScalarType;
use std::ffi::{c_char, c_int, c_void, CStr};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, OnceLock};

/// The environment variable holding the path of the cuBLAS library to use
/// (`libcublas.so.N`, or the folder holding it).
pub const CUBLAS_ENV: &str = "RUTILE_CUBLAS";

// The few cuBLAS types and constants used here (cublas_api.h, library_types.h). Enums are
// passed and returned as C ints, so an unknown status is a number, never undefined behaviour.
type Status = c_int;
type Handle = *mut c_void;
const STATUS_SUCCESS: Status = 0;
const OP_N: c_int = 0;
const CUDA_R_32F: c_int = 0;
const CUDA_R_16F: c_int = 2;
const CUDA_R_16BF: c_int = 14;
const COMPUTE_32F: c_int = 68;
const GEMM_DEFAULT: c_int = -1;
const MAJOR_VERSION: c_int = 0;
const MINOR_VERSION: c_int = 1;
const PATCH_LEVEL: c_int = 2;

type CreateFn = unsafe extern "C" fn(*mut Handle) -> Status;
type DestroyFn = unsafe extern "C" fn(Handle) -> Status;
type SetStreamFn = unsafe extern "C" fn(Handle, *mut c_void) -> Status;
type GetPropertyFn = unsafe extern "C" fn(c_int, *mut c_int) -> Status;
type StatusStringFn = unsafe extern "C" fn(Status) -> *const c_char;
#[allow(clippy::type_complexity)]
type GemmExFn = unsafe extern "C" fn(
    Handle,
    c_int,
    c_int,
    c_int,
    c_int,
    c_int,
    *const c_void,
    *const c_void,
    c_int,
    c_int,
    *const c_void,
    c_int,
    c_int,
    *const c_void,
    *mut c_void,
    c_int,
    c_int,
    c_int,
    c_int,
) -> Status;

/// The entry points rutile calls.
struct Functions {
    create: CreateFn,
    destroy: DestroyFn,
    set_stream: SetStreamFn,
    gemm_ex: GemmExFn,
    status_string: Option<StatusStringFn>,
}

/// The cuBLAS library this process loaded: where it was found and its version.
pub struct CublasLibrary {
    path: String,
    found_by: String,
    version: (u32, u32, u32),
    functions: Functions,
    // The libraries stay loaded for the life of the process (this value lives in a static),
    // so the function pointers above stay valid.
    _cublas: Library,
    _cublas_lt: Option<Library>,
}

impl CublasLibrary {
    /// The file loaded (its full path where known; else the name the loader was given).
    pub fn path(&self) -> &str {
        &self.path
    }

    /// How it was found: `RUTILE_CUBLAS`, `the dynamic loader`, `the CUDA toolkit` or
    /// `python3's site-packages` (with the interpreter's path).
    pub fn found_by(&self) -> &str {
        &self.found_by
    }

    /// The library's version, `(major, minor, patch)`.
    pub fn version(&self) -> (u32, u32, u32) {
        self.version
    }

    fn describe(&self, status: Status) -> String {
        let text = self.functions.status_string.and_then(|f| {
            // SAFETY: cublasGetStatusString returns a static NUL-terminated string (or null).
            let p = unsafe { f(status) };
            (!p.is_null()).then(|| unsafe { CStr::from_ptr(p) }.to_string_lossy().into_owned())
        });
        match text {
            Some(t) => format!("{t} ({status})"),
            None => format!("cuBLAS status {status}"),
        }
    }
}

impl std::fmt::Display for CublasLibrary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let (major, minor, patch) = self.version;
        write!(
            f,
            "cuBLAS {major}.{minor}.{patch} ({}, found by {})",
            self.path, self.found_by
        )
    }
}

impl std::fmt::Debug for CublasLibrary {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "CublasLibrary({self})")
    }
}

/// The cuBLAS library, loaded once per process on the first call (see the module's
/// documentation for where it is looked for). An `Err` (`Error::Device` with backend
/// `cuBLAS`) says what was tried and how to point rutile at the library.
pub fn library() -> Result<&'static CublasLibrary> {
    static LIBRARY: OnceLock<Result<CublasLibrary, String>> = OnceLock::new();
    LIBRARY.get_or_init(find).as_ref().map_err(|message| Error::Device {
        backend: "cuBLAS",
        message: message.clone(),
    })
}

/// True when [`library`] finds a usable cuBLAS.
pub fn is_available() -> bool {
    library().is_ok()
}

/// A cuBLAS handle bound to one [`CudaGpu`]: its work goes to that device's stream, in
/// order with its launches and copies, and in its context.
pub struct Cublas {
    device: CudaDevice,
    key: u64,
    library: &'static CublasLibrary,
    /// cuBLAS handles must not be used by two threads at once.
    handle: Mutex<HandlePtr>,
}

struct HandlePtr(Handle);
// SAFETY: a cuBLAS handle may be used from any thread, one at a time (the mutex above).
unsafe impl Send for HandlePtr {}

impl Cublas {
    /// Loads cuBLAS (once per process) and creates a handle on `gpu`'s context, issuing
    /// its work on `gpu`'s stream. An `Err` when cuBLAS is not installed or cannot run on
    /// this driver.
    pub fn new(gpu: &CudaGpu) -> Result<Cublas> {
        let library = library()?;
        let device = gpu.cuda().clone();
        device.bind()?;
        let f = &library.functions;
        let mut handle: Handle = std::ptr::null_mut();
        // SAFETY: plain out-parameter call, with the device's context current.
        let status = unsafe { (f.create)(&mut handle) };
        if status != STATUS_SUCCESS || handle.is_null() {
            let (major, minor, _) = library.version;
            let (dmajor, dminor) = {
                let v = device.properties().driver_version;
                (v / 1000, (v % 1000) / 10)
            };
            return Err(Error::Device {
                backend: "cuBLAS",
                message: format!(
                    "cublasCreate failed: {} (cuBLAS {major}.{minor} at {} on a CUDA {dmajor}.{dminor} driver; a \
                     cuBLAS newer than the driver cannot run: point {CUBLAS_ENV} at an older one)",
                    library.describe(status),
                    library.path
                ),
            });
        }
        let cublas = Cublas {
            device,
            key: gpu.device_key(),
            library,
            handle: Mutex::new(HandlePtr(handle)),
        };
        let stream = cublas.device.stream().cu_stream() as *mut c_void;
        // SAFETY: a live handle, and the stream of the same context, which outlives it (the
        // handle holds a clone of the device).
        cublas.check("cublasSetStream", unsafe { (f.set_stream)(handle, stream) })?;
        Ok(cublas)
    }

    /// The library this handle runs on.
    pub fn library(&self) -> &'static CublasLibrary {
        self.library
    }

    /// `C = A @ B` with every matrix row-major: `A` is `m x k`, `B` is `k x n`, `C` is
    /// `m x n`, products accumulated in f32 (`cublasGemmEx` with `CUBLAS_COMPUTE_32F` and
    /// cuBLAS's default algorithm, tensor cores where it chooses). `A` and `B` hold f16
    /// or bf16 (both the same); `C` holds that type or f32. The buffers must belong to the
    /// device this handle was created on and hold at least `m * k`, `k * n` and `m * n`
    /// elements (larger buffers are used from their start). Queued on the device's stream
    /// like a launch; does not wait.
    pub fn matmul<T: Element, C: Element>(
        &self,
        a: &Buffer<T>,
        b: &Buffer<T>,
        c: &Buffer<C>,
        (m, n, k): (usize, usize, usize),
    ) -> Result<()> {
        let input = match T::TYPE {
            ScalarType::F16 => CUDA_R_16F,
            ScalarType::BF16 => CUDA_R_16BF,
            t => return Err(argument(format!("A and B must hold f16 or bf16, not {t}"))),
        };
        let output = match C::TYPE {
            ScalarType::F32 => CUDA_R_32F,
            t if t == T::TYPE => input,
            t => return Err(argument(format!("C must hold {} or f32, not {t}", T::TYPE))),
        };
        let dim = |v: usize, what: &str| {
            c_int::try_from(v).map_err(|_| argument(format!("{what} = {v} is larger than cuBLAS's 32-bit sizes")))
        };
        let (mi, ni, ki) = (dim(m, "m")?, dim(n, "n")?, dim(k, "k")?);
        for (buffer, rows, cols, name) in [(a.raw(), m, k, "A"), (b.raw(), k, n, "B"), (c.raw(), m, n, "C")] {
            let need = rows.saturating_mul(cols);
            if buffer.len() < need {
                return Err(Error::Buffer(format!(
                    "cuBLAS matmul: {name} is {rows} x {cols} ({need} elements) but its buffer holds {}",
                    buffer.len()
                )));
            }
        }
        if std::ptr::eq(c.raw(), a.raw()) || std::ptr::eq(c.raw(), b.raw()) {
            return Err(argument("C must not be the buffer of A or B".into()));
        }
        if m == 0 || n == 0 {
            return Ok(());
        }
        let (pa, pb, pc) = (self.pointer(a.raw())?, self.pointer(b.raw())?, self.pointer(c.raw())?);
        let (alpha, beta) = (1.0f32, 0.0f32);
        let handle = self.handle.lock().unwrap_or_else(|e| e.into_inner());
        self.device.bind()?;
        // Column-major cuBLAS sees each row-major matrix transposed, so it computes
        // C^T (n x m) = B^T (n x k) @ A^T (k x m), each with its row length as leading
        // dimension.
        // SAFETY: the handle is live and bound to this context; the three buffers belong to
        // this device and hold the elements the dimensions reach (checked above); the
        // scalars are f32, as CUBLAS_COMPUTE_32F takes them, read before the call returns.
        let status = unsafe {
            (self.library.functions.gemm_ex)(
                handle.0,
                OP_N,
                OP_N,
                ni,
                mi,
                ki,
                (&alpha as *const f32).cast(),
                pb as *const c_void,
                input,
                ni.max(1),
                pa as *const c_void,
                input,
                ki.max(1),
                (&beta as *const f32).cast(),
                pc as *mut c_void,
                output,
                ni.max(1),
                COMPUTE_32F,
                GEMM_DEFAULT,
            )
        };
        self.check("cublasGemmEx", status)
    }

    /// The device address of a buffer of this handle's device.
    fn pointer(&self, buffer: &DeviceBuffer) -> Result<u64> {
        let storage = buffer.storage::<Mutex<CudaBuffer<u8>>>(self.key)?;
        let ptr = storage.lock().unwrap_or_else(|e| e.into_inner()).device_ptr();
        Ok(ptr)
    }

    fn check(&self, call: &str, status: Status) -> Result<()> {
        if status == STATUS_SUCCESS {
            Ok(())
        } else {
            Err(Error::Device {
                backend: "cuBLAS",
                message: format!("{call} failed: {}", self.library.describe(status)),
            })
        }
    }
}

impl Drop for Cublas {
    fn drop(&mut self) {
        let handle = self.handle.get_mut().unwrap_or_else(|e| e.into_inner());
        if self.device.bind().is_ok() {
            // SAFETY: the handle is live and used by no one else (`&mut self`).
            unsafe { (self.library.functions.destroy)(handle.0) };
        }
    }
}

impl std::fmt::Debug for Cublas {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Cublas(cuda:{}, {})", self.device.ordinal(), self.library)
    }
}

fn argument(message: String) -> Error {
    Error::Argument {
        kernel: "cuBLAS matmul".into(),
        message,
    }
}

// ---- Finding and loading the library ----

/// Looks for cuBLAS where the module's documentation says, and loads the first that opens.
fn find() -> Result<CublasLibrary, String> {
    let hint = format!(
        "install cuBLAS (the `nvidia-cublas` Python wheel, which PyTorch's CUDA wheels bring along, or the CUDA \
         toolkit), or set {CUBLAS_ENV} to the path of libcublas.so.N (with libcublasLt.so.N in the same folder)"
    );
    if let Some(value) = std::env::var_os(CUBLAS_ENV).filter(|v| !v.is_empty()) {
        let path = PathBuf::from(&value);
        let file = if path.is_dir() {
            candidates_in(&path)
                .into_iter()
                .next()
                .ok_or_else(|| format!("{CUBLAS_ENV}={}: no cuBLAS library in that folder", path.display()))?
        } else {
            path
        };
        return open_file(&file, CUBLAS_ENV.to_string()).map_err(|e| {
            format!(
                "{CUBLAS_ENV}={}: cannot load it: {e}. {CUBLAS_ENV} must name a libcublas.so.N or its folder; \
                     unset it to let rutile search for cuBLAS",
                file.display()
            )
        });
    }
    let mut tried = Vec::new();
    let mut failures = Vec::new();
    // 1. By name, through the dynamic loader's own search.
    let names = standard_names();
    for name in &names {
        // SAFETY: loading cuBLAS runs its initialisers, which only set up the library.
        if let Ok(lib) = unsafe { Library::new(name) } {
            let path = loaded_path(name).unwrap_or_else(|| name.clone());
            match finish(lib, None, path, "the dynamic loader".into()) {
                Ok(l) => return Ok(l),
                Err(e) => failures.push(format!("{name}: {e}")),
            }
        }
    }
    tried.push(format!("{} through the dynamic loader", names.join(", ")));
    // 2. The CUDA toolkit's folders, and 3. Python's wheels.
    let mut folders: Vec<(PathBuf, String)> = toolkit_folders()
        .into_iter()
        .map(|f| (f, "the CUDA toolkit".to_string()))
        .collect();
    let (python_folders, pythons) = python_folders();
    folders.extend(python_folders);
    tried.push(format!(
        "the CUDA toolkit's folders ($CUDA_HOME, $CUDA_PATH, /usr/local/cuda) and the nvidia wheels of {}",
        if pythons.is_empty() {
            "python3 (none on PATH)".to_string()
        } else {
            pythons.join(", ")
        }
    ));
    for (folder, found_by) in folders {
        for file in candidates_in(&folder) {
            match open_file(&file, found_by.clone()) {
                Ok(l) => return Ok(l),
                Err(e) => failures.push(format!("{}: {e}", file.display())),
            }
        }
    }
    let mut message = format!("not installed or not found (tried {})", tried.join("; "));
    if !failures.is_empty() {
        message += &format!("; found but could not load: {}", failures.join("; "));
    }
    Err(format!("{message}. To use it, {hint}"))
}

/// The driver's CUDA major version, where a driver is present.
fn driver_major() -> Option<u32> {
    crate::cuda::probe().ok().map(|i| i.version / 1000)
}

/// cuBLAS's major versions to try, newest first, those newer than the driver last (they
/// load but cannot create a handle).
fn majors() -> Vec<u32> {
    let mut majors = vec![13, 12, 11];
    if let Some(d) = driver_major() {
        majors.sort_by_key(|&m| (m > d, std::cmp::Reverse(m)));
    }
    majors
}

#[cfg(not(windows))]
fn standard_names() -> Vec<String> {
    let mut names: Vec<String> = majors().into_iter().map(|m| format!("libcublas.so.{m}")).collect();
    names.push("libcublas.so".into());
    names
}

#[cfg(windows)]
fn standard_names() -> Vec<String> {
    majors().into_iter().map(|m| format!("cublas64_{m}.dll")).collect()
}

/// The major version of a cuBLAS file name (`libcublas.so.12.8.4.1` → 12), `Some(0)` for an
/// unversioned name, `None` for another file (`libcublasLt`, say).
fn cublas_major(name: &str) -> Option<u32> {
    let version = if cfg!(windows) {
        name.strip_prefix("cublas64_")?.strip_suffix(".dll")?
    } else {
        let rest = name.strip_prefix("libcublas.so")?;
        if rest.is_empty() {
            return Some(0);
        }
        rest.strip_prefix('.')?
    };
    version.split('.').next()?.parse().ok()
}

/// The cuBLAS libraries in a folder, best first (the order of [`majors`], then unversioned).
fn candidates_in(folder: &Path) -> Vec<PathBuf> {
    let Ok(entries) = std::fs::read_dir(folder) else {
        return Vec::new();
    };
    let order = majors();
    let mut found: Vec<(usize, usize, PathBuf)> = entries
        .filter_map(|e| e.ok())
        .filter_map(|e| {
            let name = e.file_name().to_string_lossy().into_owned();
            let major = cublas_major(&name)?;
            let rank = order.iter().position(|&m| m == major).unwrap_or(order.len());
            // The shortest name of a version first (`.so.12` before `.so.12.8.4.1`).
            Some((rank, name.len(), e.path()))
        })
        .collect();
    found.sort();
    found.into_iter().map(|(_, _, p)| p).collect()
}

/// Loads the cuBLAS file at `path`, with the libcublasLt beside it first.
fn open_file(path: &Path, found_by: String) -> Result<CublasLibrary, String> {
    if !path.is_file() {
        return Err("no such file".into());
    }
    let lt = lt_beside(path).and_then(|lt| {
        // SAFETY: as for cuBLAS itself below. Loaded by path first, so that cuBLAS's
        // dependency on it (by its soname) is met by this copy.
        unsafe { Library::new(&lt) }.ok()
    });
    // SAFETY: loading cuBLAS runs its initialisers, which only set up the library.
    let lib = unsafe { Library::new(path) }.map_err(|e| e.to_string())?;
    let full = std::fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf());
    finish(lib, lt, full.display().to_string(), found_by)
}

/// The libcublasLt of the same version in the same folder as a cuBLAS file.
fn lt_beside(path: &Path) -> Option<PathBuf> {
    let folder = path.parent()?;
    let name = path.file_name()?.to_string_lossy().into_owned();
    let (from, to) = if cfg!(windows) {
        ("cublas64_", "cublasLt64_")
    } else {
        ("libcublas", "libcublasLt")
    };
    let same = folder.join(name.replacen(from, to, 1));
    if same.is_file() {
        return Some(same);
    }
    // `libcublas.so.12` beside `libcublasLt.so.12.8.4.1`, say: any of the same major.
    let major = cublas_major(&name)?;
    let mut others: Vec<PathBuf> = std::fs::read_dir(folder)
        .ok()?
        .filter_map(|e| e.ok())
        .filter(|e| {
            let n = e.file_name().to_string_lossy().into_owned();
            n.starts_with(to) && cublas_major(&n.replacen(to, from, 1)) == Some(major)
        })
        .map(|e| e.path())
        .collect();
    others.sort();
    others.into_iter().next()
}

/// Resolves the entry points of a loaded cuBLAS and reads its version.
fn finish(lib: Library, lt: Option<Library>, path: String, found_by: String) -> Result<CublasLibrary, String> {
    /// A function pointer of type `F` named `name`.
    unsafe fn symbol<F: Copy>(lib: &Library, name: &str) -> Result<F, String> {
        lib.get::<F>(name).map(|s| *s).map_err(|e| format!("no `{name}`: {e}"))
    }
    // SAFETY: each type is the C signature of the named cuBLAS entry point (cublas_api.h,
    // unchanged from CUDA 11 to 13); the pointers stay valid while `lib` is loaded, and it
    // is kept with them.
    let (functions, get_property) = unsafe {
        (
            Functions {
                create: symbol::<CreateFn>(&lib, "cublasCreate_v2")?,
                destroy: symbol::<DestroyFn>(&lib, "cublasDestroy_v2")?,
                set_stream: symbol::<SetStreamFn>(&lib, "cublasSetStream_v2")?,
                gemm_ex: symbol::<GemmExFn>(&lib, "cublasGemmEx")?,
                status_string: symbol::<StatusStringFn>(&lib, "cublasGetStatusString").ok(),
            },
            symbol::<GetPropertyFn>(&lib, "cublasGetProperty")?,
        )
    };
    let property = |p| {
        let mut v: c_int = 0;
        // SAFETY: plain out-parameter call; needs no handle or device.
        let status = unsafe { get_property(p, &mut v) };
        if status == STATUS_SUCCESS {
            Ok(v.max(0) as u32)
        } else {
            Err(format!("cublasGetProperty failed with status {status}"))
        }
    };
    let version = (
        property(MAJOR_VERSION)?,
        property(MINOR_VERSION)?,
        property(PATCH_LEVEL)?,
    );
    Ok(CublasLibrary {
        path,
        found_by,
        version,
        functions,
        _cublas: lib,
        _cublas_lt: lt,
    })
}

/// The full path of a library the process loaded by name, from `/proc/self/maps` (Linux).
fn loaded_path(name: &str) -> Option<String> {
    let maps = std::fs::read_to_string("/proc/self/maps").ok()?;
    let stem = name.split(".so").next()?;
    maps.lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .find(|p| {
            Path::new(p)
                .file_name()
                .is_some_and(|f| f.to_string_lossy().starts_with(&format!("{stem}.so")))
        })
        .map(str::to_string)
}

/// The CUDA toolkit's library folders that exist.
fn toolkit_folders() -> Vec<PathBuf> {
    let mut roots: Vec<PathBuf> = ["CUDA_HOME", "CUDA_PATH"]
        .iter()
        .filter_map(std::env::var_os)
        .filter(|v| !v.is_empty())
        .map(PathBuf::from)
        .collect();
    roots.push(PathBuf::from("/usr/local/cuda"));
    let mut folders = Vec::new();
    for root in roots {
        for sub in [
            "lib64",
            "lib",
            "bin",
            "targets/x86_64-linux/lib",
            "targets/sbsa-linux/lib",
        ] {
            let folder = root.join(sub);
            if folder.is_dir() && !folders.contains(&folder) {
                folders.push(folder);
            }
        }
    }
    folders
}

/// The folders of NVIDIA's library wheels (`site-packages/nvidia/*/lib`, and
/// `torch/lib`, where older PyTorch wheels put cuBLAS) of every `python3` and `python` on
/// `PATH`, with how each was found; and the interpreters asked.
fn python_folders() -> (Vec<(PathBuf, String)>, Vec<String>) {
    let mut pythons: Vec<PathBuf> = Vec::new();
    let path = std::env::var_os("PATH").unwrap_or_default();
    for dir in std::env::split_paths(&path) {
        for exe in ["python3", "python", "python3.exe", "python.exe"] {
            let p = dir.join(exe);
            if p.is_file() {
                let real = std::fs::canonicalize(&p).unwrap_or_else(|_| p.clone());
                if !pythons
                    .iter()
                    .any(|q| std::fs::canonicalize(q).unwrap_or_else(|_| q.clone()) == real)
                {
                    pythons.push(p);
                }
            }
        }
    }
    let mut folders = Vec::new();
    let mut asked = Vec::new();
    for python in pythons {
        let shown = python.display().to_string();
        let Ok(out) = std::process::Command::new(&python)
            .args(["-c", "import sys; print('\\n'.join(sys.path))"])
            .stderr(std::process::Stdio::null())
            .stdin(std::process::Stdio::null())
            .output()
        else {
            continue;
        };
        asked.push(shown.clone());
        let found_by = format!("the nvidia wheels of {shown}");
        for entry in String::from_utf8_lossy(&out.stdout).lines() {
            let site = Path::new(entry.trim());
            if entry.trim().is_empty() || !site.is_dir() {
                continue;
            }
            let mut add = |folder: PathBuf| {
                if folder.is_dir() && !folders.iter().any(|(f, _)| f == &folder) {
                    folders.push((folder, found_by.clone()));
                }
            };
            // nvidia/cublas/lib (CUDA 12 wheels), nvidia/cu13/lib (CUDA 13 wheels), ...
            if let Ok(packages) = std::fs::read_dir(site.join("nvidia")) {
                let mut packages: Vec<PathBuf> = packages.filter_map(|e| e.ok()).map(|e| e.path()).collect();
                packages.sort();
                for package in packages {
                    add(package.join("lib"));
                    add(package.join("bin"));
                }
            }
            add(site.join("torch").join("lib"));
        }
    }
    (folders, asked)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn file_names_give_major_versions() {
        if cfg!(windows) {
            assert_eq!(cublas_major("cublas64_12.dll"), Some(12));
            assert_eq!(cublas_major("cublasLt64_12.dll"), None);
        } else {
            assert_eq!(cublas_major("libcublas.so.13"), Some(13));
            assert_eq!(cublas_major("libcublas.so.12.8.4.1"), Some(12));
            assert_eq!(cublas_major("libcublas.so"), Some(0));
            assert_eq!(cublas_major("libcublasLt.so.12"), None);
            assert_eq!(cublas_major("libcublas_static.a"), None);
        }
    }

    /// Without cuBLAS the answer is an `Err` that says how to point rutile at it; with it,
    /// a version. Never a panic.
    #[test]
    fn library_loads_or_explains() {
        match library() {
            Ok(lib) => {
                println!("{lib}");
                assert!(lib.version().0 >= 11, "{lib}");
                assert!(!lib.path().is_empty());
            }
            Err(e) => {
                let text = e.to_string();
                println!("{text}");
                assert!(text.contains(CUBLAS_ENV), "{text}");
            }
        }
    }

    /// On a machine with a CUDA GPU and cuBLAS: rectangular products (so that a mix-up of
    /// `m`, `n`, `k` or the leading dimensions shows) match the CPU's, f16 into f32 and bf16
    /// into bf16, and bad arguments are errors.
    #[test]
    fn matmul_matches_the_cpu_where_available() {
        use crate::DeviceExt;
        use half::{bf16, f16};
        let Ok(gpu) = CudaGpu::open(0) else { return };
        let cublas = match Cublas::new(&gpu) {
            Ok(c) => c,
            Err(e) => {
                println!("skipped: {e}");
                return;
            }
        };
        let (m, n, k) = (37, 20, 45);
        let a: Vec<f32> = (0..m * k).map(|i| ((i * 7 % 13) as f32 - 6.0) / 8.0).collect();
        let b: Vec<f32> = (0..k * n).map(|i| ((i * 5 % 11) as f32 - 5.0) / 4.0).collect();
        let mut want = vec![0.0f64; m * n];
        for i in 0..m {
            for j in 0..n {
                want[i * n + j] = (0..k).map(|p| a[i * k + p] as f64 * b[p * n + j] as f64).sum();
            }
        }
        // Small integers over powers of two: exact in f16, bf16 and f32.
        let a16: Vec<f16> = a.iter().map(|&v| f16::from_f32(v)).collect();
        let b16: Vec<f16> = b.iter().map(|&v| f16::from_f32(v)).collect();
        let (ab, bb, cb) = (
            gpu.upload(&a16).unwrap(),
            gpu.upload(&b16).unwrap(),
            gpu.zeros::<f32>(m * n).unwrap(),
        );
        cublas.matmul(&ab, &bb, &cb, (m, n, k)).unwrap();
        let got = gpu.download(&cb).unwrap();
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(*g as f64, *w, "f16 -> f32, element {i}");
        }
        let a_bf: Vec<bf16> = a.iter().map(|&v| bf16::from_f32(v)).collect();
        let b_bf: Vec<bf16> = b.iter().map(|&v| bf16::from_f32(v)).collect();
        let (ab, bb, cb) = (
            gpu.upload(&a_bf).unwrap(),
            gpu.upload(&b_bf).unwrap(),
            gpu.zeros::<bf16>(m * n).unwrap(),
        );
        cublas.matmul(&ab, &bb, &cb, (m, n, k)).unwrap();
        let got = gpu.download(&cb).unwrap();
        for (i, (g, w)) in got.iter().zip(&want).enumerate() {
            assert_eq!(g.to_f64(), bf16::from_f64(*w).to_f64(), "bf16 -> bf16, element {i}");
        }
        // Too small a buffer, a mismatched output type, an input type cuBLAS is not asked
        // for here: errors, not launches.
        assert!(cublas.matmul(&ab, &bb, &cb, (m + 1, n, k)).is_err());
        let c16 = gpu.zeros::<f16>(m * n).unwrap();
        assert!(cublas.matmul(&ab, &bb, &c16, (m, n, k)).is_err());
        let (af, bf, cf) = (
            gpu.upload(&a).unwrap(),
            gpu.upload(&b).unwrap(),
            gpu.zeros::<f32>(m * n).unwrap(),
        );
        assert!(cublas.matmul(&af, &bf, &cf, (m, n, k)).is_err());
        println!("{cublas:?}");
    }

    #[test]
    fn folder_candidates_are_ordered() {
        let dir = std::env::temp_dir().join(format!("rutile-cublas-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join("libcublasLt.so.12"), b"").unwrap();
        std::fs::write(dir.join("libcublas.so.12.8.4.1"), b"").unwrap();
        std::fs::write(dir.join("libcublas.so.12"), b"").unwrap();
        let found = candidates_in(&dir);
        let names: Vec<String> = found
            .iter()
            .map(|p| p.file_name().unwrap().to_string_lossy().into_owned())
            .collect();
        if !cfg!(windows) {
            assert_eq!(names, ["libcublas.so.12", "libcublas.so.12.8.4.1"]);
            assert_eq!(
                lt_beside(&dir.join("libcublas.so.12")).unwrap().file_name().unwrap(),
                "libcublasLt.so.12"
            );
            // An empty file is not a library: an error, not a panic.
            assert!(open_file(&dir.join("libcublas.so.12"), "test".into()).is_err());
        }
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
