#!/usr/bin/env bash
# Build llama.cpp's llama-server from the llama-cpp-python 0.3.36 source distribution
# (the same llama.cpp the engine benchmark compares with). Outside CI: ~10 minutes on
# 2 cores. Prints the binary's path; pass it to bench_batching.py --llama-server.
set -euo pipefail
out=${1:-$HOME/.cache/llamars/llama-server-build}
mkdir -p "$out"
cd "$out"
command -v cmake >/dev/null || { echo "cmake is needed: apt-get install -y cmake" >&2; exit 1; }
if [ ! -d src ]; then
  python -m pip download --no-binary :all: --no-deps llama-cpp-python==0.3.36 -d . >&2
  mkdir src && tar -xzf llama_cpp_python-0.3.36.tar.gz -C src --strip-components=1
fi
# Plain x86-64 AVX2/AVX-512 build without AMX (the default native build can pick AMX
# instructions some CPUs advertise but the VM traps).
cmake -S src/vendor/llama.cpp -B build -DCMAKE_BUILD_TYPE=Release -DLLAMA_CURL=OFF -DLLAMA_BUILD_SERVER=ON \
  -DGGML_NATIVE=OFF -DGGML_AVX=ON -DGGML_AVX2=ON -DGGML_FMA=ON -DGGML_F16C=ON -DGGML_AVX512=ON \
  -DGGML_AVX512_VNNI=ON -DGGML_AVX512_VBMI=ON -DGGML_AVX512_BF16=ON -DGGML_AVX_VNNI=ON >&2
cmake --build build --target llama-server -j"$(nproc)" >&2
echo "$out/build/bin/llama-server"
