#!/usr/bin/env bash
# Build llama.cpp's llama-server from the llama-cpp-python 0.3.36 source distribution
# (the same llama.cpp the engine benchmark compares with). Outside CI: ~10 minutes on
# 2 cores. Builds llama-bench beside it. Prints llama-server's path; pass it to
# bench_batching.py --llama-server.
set -euo pipefail
out=${1:-$HOME/.cache/llamars/llama-server-build}
mkdir -p "$out"
cd "$out"
command -v cmake >/dev/null || { echo "cmake is needed: apt-get install -y cmake" >&2; exit 1; }
if [ ! -d src ]; then
  # the sdist from PyPI's simple index (`pip download --no-binary :all:` would build its
  # build dependencies, cmake included, from source first)
  python3 - >&2 <<'PY'
import re, urllib.request
req = urllib.request.Request("https://pypi.org/simple/llama-cpp-python/", headers={"Accept": "text/html"})
idx = urllib.request.urlopen(req, timeout=60).read().decode()
m = re.search(r'href="([^"]*/llama_cpp_python-0\.3\.36\.tar\.gz)#sha256=([0-9a-f]+)"', idx)
if not m:
    raise SystemExit("llama_cpp_python-0.3.36.tar.gz is not on PyPI's simple index")
import hashlib
data = urllib.request.urlopen(m.group(1), timeout=600).read()
if hashlib.sha256(data).hexdigest() != m.group(2):
    raise SystemExit("llama_cpp_python-0.3.36.tar.gz: sha256 mismatch")
open("llama_cpp_python-0.3.36.tar.gz", "wb").write(data)
PY
  mkdir src && tar -xzf llama_cpp_python-0.3.36.tar.gz -C src --strip-components=1
fi
# Plain x86-64 AVX2/AVX-512 build without AMX (the default native build can pick AMX
# instructions some CPUs advertise but the VM traps); each AVX-512 / VNNI extension only
# where this CPU has it (an instruction it lacks ends llama-server with SIGILL).
has() { grep -m1 '^flags' /proc/cpuinfo 2>/dev/null | tr ' ' '\n' | grep -qx "$1" && echo ON || echo OFF; }
cmake -S src/vendor/llama.cpp -B build -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DLLAMA_BUILD_SERVER=ON \
  -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512="$(has avx512f)" \
  -DGGML_AVX512_VNNI="$(has avx512_vnni)" -DGGML_AVX512_VBMI="$(has avx512vbmi)" -DGGML_AVX512_BF16="$(has avx512_bf16)" \
  -DGGML_AVX_VNNI="$(has avx_vnni)" >&2
cmake --build build --target llama-server llama-bench -j"$(nproc)" >&2
echo "$out/build/bin/llama-server"
