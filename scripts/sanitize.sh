#!/usr/bin/env bash
# Runs rutile's CUDA kernels under NVIDIA's compute-sanitizer: memcheck, racecheck,
# synccheck and initcheck over the test binary `sanitizer_kernels` (every seed kernel, the
# matmul on its CUDA-core and tensor-core paths, a sample of the differential fuzzer's
# random kernels; examples/tests/sanitizer_kernels.rs). Fails on any report.
#
#   scripts/sanitize.sh [TOOL...]     # run: all four tools, or those named
#   scripts/sanitize.sh --stage       # stage compute-sanitizer for a GPU machine (below)
#
# Needs a CUDA GPU and its driver; no Rust. The test binary is, in this order of search:
#   $RUTILE_SANITIZE_BIN
#   .gpu/bin/test-sanitizer_kernels.gz    (staged for a machine without Rust)
#   target/release/deps/sanitizer_kernels-*   (the newest; `cargo test --release --no-run
#                                            -p rutile-examples --test sanitizer_kernels`)
# compute-sanitizer is, in this order:
#   $RUTILE_COMPUTE_SANITIZER
#   compute-sanitizer on PATH
#   /usr/local/cuda*/bin/compute-sanitizer, /usr/local/cuda*/compute-sanitizer/compute-sanitizer
#   .gpu/sanitizer/compute-sanitizer      (from .gpu/sanitizer.tar.gz, made by --stage)
#   target/tools/cuda-sanitizer-*/compute-sanitizer   (made by --stage)
#
# --stage installs compute-sanitizer from the pip wheel nvidia-cuda-sanitizer-api-cu12
# (pinned below; a 12.x sanitizer runs on any newer driver) into target/tools/, as one
# folder (the binary beside its libraries, as the CUDA toolkit lays it out), and packs it
# into .gpu/sanitizer.tar.gz (about 9 MB) beside the staged test binaries, so that a GPU
# machine without network has it.
#
# Environment: RUTILE_SANITIZE_KERNELS (random kernels per run; default 24, 8 for
# racecheck, the slow one). Logs go to $OUT/sanitize-TOOL.log when OUT is set, else to
# target/sanitize/ or a temporary folder.
set -uo pipefail

SANITIZER_WHEEL_VERSION="12.9.79"   # nvidia-cuda-sanitizer-api-cu12; bump deliberately
TOOLS=(memcheck racecheck synccheck initcheck)

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
say() { echo "sanitize.sh: $*" >&2; }
die() { echo "sanitize.sh: error: $*" >&2; exit 1; }

stage() {
    local target="$ROOT/target/tools/cuda-sanitizer-$SANITIZER_WHEEL_VERSION"
    if [[ ! -x "$target/compute-sanitizer" ]]; then
        command -v python3 >/dev/null 2>&1 && python3 -m pip --version >/dev/null 2>&1 \
            || die "--stage needs python3 with pip"
        local wheel="$target.wheel"
        rm -rf "$wheel" "$target"
        say "installing compute-sanitizer (pip nvidia-cuda-sanitizer-api-cu12==$SANITIZER_WHEEL_VERSION)"
        env PIP_ROOT_USER_ACTION=ignore python3 -m pip install --quiet --no-input \
            --disable-pip-version-check --no-deps --target "$wheel" \
            "nvidia-cuda-sanitizer-api-cu12==$SANITIZER_WHEEL_VERSION" \
            || die "pip could not install nvidia-cuda-sanitizer-api-cu12==$SANITIZER_WHEEL_VERSION"
        local from="$wheel/nvidia/cuda_sanitizer_api"
        [[ -f "$from/bin/compute-sanitizer" ]] || die "the wheel has no bin/compute-sanitizer"
        mkdir -p "$target"
        # One folder, as in the toolkit: the binary looks for its libraries beside it.
        cp "$from"/bin/* "$from"/lib/*.so* "$target/"
        chmod +x "$target/compute-sanitizer"
        rm -rf "$wheel"
    fi
    "$target/compute-sanitizer" --version >/dev/null 2>&1 || die "$target/compute-sanitizer does not run"
    mkdir -p "$ROOT/.gpu"
    tar -czf "$ROOT/.gpu/sanitizer.tar.gz" -C "$target/.." "$(basename "$target")"
    say "staged $(du -h "$ROOT/.gpu/sanitizer.tar.gz" | cut -f1) in .gpu/sanitizer.tar.gz"
    [[ -n "$(ls "$ROOT"/.gpu/bin/test-sanitizer_kernels* 2>/dev/null)" ]] \
        || say "note: no test binary in .gpu/bin yet; build it with cargo test --release --no-run -p rutile-examples --test sanitizer_kernels"
}

find_sanitizer() {
    local c
    if [[ -n "${RUTILE_COMPUTE_SANITIZER:-}" ]]; then
        [[ -x "$RUTILE_COMPUTE_SANITIZER" ]] || die "RUTILE_COMPUTE_SANITIZER=$RUTILE_COMPUTE_SANITIZER is not an executable"
        echo "$RUTILE_COMPUTE_SANITIZER"; return
    fi
    if c="$(command -v compute-sanitizer)"; then echo "$c"; return; fi
    for c in /usr/local/cuda*/bin/compute-sanitizer /usr/local/cuda*/compute-sanitizer/compute-sanitizer; do
        [[ -x "$c" ]] && { echo "$c"; return; }
    done
    if [[ -f "$ROOT/.gpu/sanitizer.tar.gz" ]]; then
        mkdir -p "$ROOT/.gpu/sanitizer"
        tar -xzf "$ROOT/.gpu/sanitizer.tar.gz" -C "$ROOT/.gpu/sanitizer" --strip-components=1 \
            || die "unpacking .gpu/sanitizer.tar.gz failed"
        echo "$ROOT/.gpu/sanitizer/compute-sanitizer"; return
    fi
    for c in "$ROOT"/target/tools/cuda-sanitizer-*/compute-sanitizer; do
        [[ -x "$c" ]] && { echo "$c"; return; }
    done
    die "compute-sanitizer not found: set RUTILE_COMPUTE_SANITIZER, put it on PATH, install the CUDA \
toolkit under /usr/local/cuda, or stage it with scripts/sanitize.sh --stage (pip wheel nvidia-cuda-sanitizer-api-cu12)"
}

find_test_binary() {
    if [[ -n "${RUTILE_SANITIZE_BIN:-}" ]]; then
        [[ -x "$RUTILE_SANITIZE_BIN" ]] || die "RUTILE_SANITIZE_BIN=$RUTILE_SANITIZE_BIN is not an executable"
        echo "$RUTILE_SANITIZE_BIN"; return
    fi
    local staged="$ROOT/.gpu/bin/test-sanitizer_kernels.gz"
    if [[ -f "$staged" ]]; then
        local dir="${TMPDIR:-/tmp}/rutile-sanitize"
        mkdir -p "$dir"
        gunzip -c "$staged" > "$dir/sanitizer_kernels" && chmod +x "$dir/sanitizer_kernels" \
            || die "unpacking $staged failed"
        echo "$dir/sanitizer_kernels"; return
    fi
    local built
    built="$(ls -t "$ROOT"/target/release/deps/sanitizer_kernels-* 2>/dev/null | grep -v '\.d$' | head -n1)"
    [[ -n "$built" ]] || die "no sanitizer_kernels test binary: build it (cargo test --release --no-run \
-p rutile-examples --test sanitizer_kernels) or set RUTILE_SANITIZE_BIN"
    echo "$built"
}

# The summary line a tool prints, and whether it reports nothing.
clean_summary() {  # tool log
    case "$1" in
        racecheck) grep -qE "RACECHECK SUMMARY: 0 hazards displayed" "$2" ;;
        *) grep -qE "ERROR SUMMARY: 0 errors" "$2" ;;
    esac
}

run_tool() {  # tool sanitizer binary logdir
    local tool="$1" sanitizer="$2" bin="$3" log="$4/sanitize-$1.log"
    local kernels="${RUTILE_SANITIZE_KERNELS:-24}" extra=()
    case "$tool" in
        memcheck) extra=(--leak-check full) ;;
        racecheck) kernels="${RUTILE_SANITIZE_KERNELS:-8}" ;;
        synccheck|initcheck) ;;
        *) die "unknown tool '$tool'; the tools are ${TOOLS[*]}" ;;
    esac
    say "$tool: $sanitizer --tool $tool ${extra[*]} $(basename "$bin") (log: $log)"
    local start=$SECONDS
    # RUTILE_REQUIRE=cuda: without a CUDA device the cases would run on the interpreter
    # alone and sanitize nothing; the tests fail instead.
    RUTILE_REQUIRE=cuda RUTILE_SANITIZE_KERNELS="$kernels" \
        "$sanitizer" --tool "$tool" --error-exitcode 86 --print-limit 50 "${extra[@]}" \
        "$bin" --test-threads=1 --nocapture >"$log" 2>&1
    local rc=$?
    grep -E "SUMMARY|test result|agree with" "$log" | sed "s/^/  $tool: /" >&2
    if [[ $rc -ne 0 ]] || ! clean_summary "$tool" "$log"; then
        tail -n 60 "$log" >&2
        say "$tool: FAILED (exit $rc, $((SECONDS - start)) s); full log: $log"
        return 1
    fi
    say "$tool: clean ($((SECONDS - start)) s)"
}

main() {
    if [[ "${1:-}" == "--stage" ]]; then stage; return; fi
    local tools=("$@")
    [[ ${#tools[@]} -gt 0 ]] || tools=("${TOOLS[@]}")
    local sanitizer bin logdir
    sanitizer="$(find_sanitizer)" || exit 1
    bin="$(find_test_binary)" || exit 1
    "$sanitizer" --version >/dev/null 2>&1 || die "$sanitizer does not run"
    say "$("$sanitizer" --version | grep -m1 -iE 'version' || true) at $sanitizer"
    if [[ -n "${OUT:-}" ]]; then logdir="$OUT"
    elif [[ -w "$ROOT/target" ]] || mkdir -p "$ROOT/target" 2>/dev/null; then logdir="$ROOT/target/sanitize"
    else logdir="$(mktemp -d)"; fi
    mkdir -p "$logdir"
    local failed=()
    for tool in "${tools[@]}"; do
        run_tool "$tool" "$sanitizer" "$bin" "$logdir" || failed+=("$tool")
    done
    if [[ ${#failed[@]} -gt 0 ]]; then
        die "compute-sanitizer reported problems (or did not finish) in: ${failed[*]}"
    fi
    say "all clean: ${tools[*]}"
}

main "$@"
