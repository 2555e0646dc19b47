#!/usr/bin/env bash
# The peers of candle bench ops, bench/compare and bench/serve_bench.py (from
# Debian's packages and PyPI). Not needed by the build or `make test`; `make
# bench-deps` runs it. Idempotent: each part is skipped when it is already there.
#
# OpenBLAS: the peer of `candle bench ops` (dlopen'ed), Debian's libopenblas0
# with apt-get when missing and root (or sudo).
#
# llama.cpp: llama-cpp-python (with its server's extras) for the python3 that
# runs bench/compare, built from its source distribution on this machine
# (llama.cpp's native CPU build, as llama-bench would be; ~10 minutes on 2
# cores). CANDLE_BENCH_LLAMA_PIP overrides the pinned version.
#
# PyTorch and transformers for the PyTorch peer (bench/torch_bench.py), in a
# virtual environment of their own: build-bench/venv (or $CANDLE_BENCH_VENV);
# CANDLE_BENCH_TORCH=0 skips them.
#
# From PyPI only. PyPI's Linux torch wheel is built for CUDA and the whole
# dependency set is needed even on a CPU-only machine: `pip install --no-deps
# torch` installs, but `import torch` fails (libcufile.so.0 missing), because
# libtorch_cuda.so, loaded by every import, links cuBLAS, cuDNN, cuFFT, cuFile,
# cuSPARSE(Lt), NCCL, NVSHMEM and NVRTC. So this installs ~5.6 GB (about
# 4 minutes here); only triton (1 GB) would be optional, and skipping it is not
# worth pinning every CUDA package by hand. transformers' GGUF loader needs
# accelerate and gguf.
set -euo pipefail

root="$(cd "$(dirname "$0")/.." && pwd)"
venv="${CANDLE_BENCH_VENV:-$root/build-bench/venv}"
# The versions bench/torch_bench.py was checked with; override to try others.
specs="${CANDLE_BENCH_PIP:-torch==2.15.0 transformers==5.24.0 accelerate==1.15.0 gguf==0.19.0 numpy}"

if ! ldconfig -p 2>/dev/null | grep -q 'libopenblas\.so\.0' && command -v apt-get >/dev/null 2>&1; then
    sudo=""
    [ "$(id -u)" -eq 0 ] || sudo="sudo"
    echo "install-bench-deps: installing libopenblas0 (candle bench ops' peer)" >&2
    $sudo apt-get update -qq && DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq libopenblas0 >&2 ||
        echo "install-bench-deps: libopenblas0 not installed; candle bench ops runs Candle alone" >&2
fi

llama_specs="${CANDLE_BENCH_LLAMA_PIP:-llama-cpp-python[server]==0.3.36}"
if ! python3 -c 'import llama_cpp, llama_cpp.server.app' >/dev/null 2>&1; then
    echo "install-bench-deps: building $llama_specs for $(command -v python3) (about 10 minutes)" >&2
    # shellcheck disable=SC2086  # a list of requirement words
    python3 -m pip install --quiet --disable-pip-version-check --no-binary llama-cpp-python $llama_specs >&2
    python3 -c 'import llama_cpp, llama_cpp.server.app; print("install-bench-deps: llama-cpp-python",
        llama_cpp.__version__)' >&2
fi
[ "${CANDLE_BENCH_TORCH:-1}" = 0 ] && exit 0

check() {
    "$venv/bin/python" - <<'EOF' >/dev/null 2>&1
import accelerate, gguf, numpy, torch, transformers
x = torch.ones(8, 8)
assert float((x @ x).sum()) == 512.0
EOF
}

if [ -x "$venv/bin/python" ] && check; then
    exit 0
fi
if ! command -v python3 >/dev/null 2>&1 || ! python3 -m venv -h >/dev/null 2>&1; then
    bash "$root/scripts/install-deps.sh"
    if ! python3 -m venv -h >/dev/null 2>&1; then
        echo "install-bench-deps: python3 -m venv is needed (apt-get install python3-venv)" >&2
        exit 1
    fi
fi
mkdir -p "$(dirname "$venv")"
[ -x "$venv/bin/python" ] || python3 -m venv "$venv"
echo "install-bench-deps: installing $specs into $venv (several GB)" >&2
# shellcheck disable=SC2086  # specs is a list of requirement words
"$venv/bin/python" -m pip install --quiet --disable-pip-version-check $specs >&2
if ! check; then
    echo "install-bench-deps: $venv/bin/python cannot import torch/transformers after the install" >&2
    exit 1
fi
"$venv/bin/python" -c 'import torch, transformers; print("install-bench-deps: torch",
    torch.__version__, "transformers", transformers.__version__)' >&2
