#!/usr/bin/env bash
# One pass of the GPU checks on a machine with a GPU (what the closing notes of the GPU
# work report): list devices, the kernel parity tests, the GPU-vs-CPU tests of every
# architecture, then bench_gpu.py on a model of the real model's shapes (random weights,
# from HEADER) and on a generated ~1.1B-parameter Q4_K llama.
#   benchmarks/gpu_check.sh HEADER.bin [KERNEL_TEST_BINARY] [--llamacpp-pp P1 --llamacpp-tg T1 ...]
set -uo pipefail
cd "$(dirname "$0")/.."
header=$1; shift
kbin=""
if [ $# -gt 0 ] && [ -x "$1" ]; then kbin=$1; shift; fi
export PYTHONPATH="${PYTHONPATH:+$PYTHONPATH:}$PWD/python" PYTHONUNBUFFERED=1
work=${WORK:-/tmp/llamars-gpu}
mkdir -p "$work"
echo "== devices"
python3 -m llamars.cli --list-devices
if [ -n "$kbin" ]; then
  echo "== kernel parity (rust/gpu/tests.rs)"
  LLAMARS_REQUIRE_GPU=1 "$kbin" gpu:: 2>&1 | grep -v XDG_RUNTIME
fi
echo "== GPU vs CPU, every architecture (tests/test_gpu.py, tiny models)"
LLAMARS_REQUIRE_GPU=1 python3 -m pytest -q -p no:cacheprovider tests/test_gpu.py -k "tiny or devices or ngl_zero or list_devices" 2>&1 | tail -5
echo "== models"
python3 benchmarks/make_bench_model.py like "$header" "$work/gemma3-270m-shape.gguf" 2>/dev/null
python3 benchmarks/make_bench_model.py llama "$work/llama-1.1b-q4k.gguf" 2>/dev/null
echo "== bench_gpu.py"
python3 benchmarks/bench_gpu.py "$work/gemma3-270m-shape.gguf" "$work/llama-1.1b-q4k.gguf" --reps 2 "$@"
