#!/usr/bin/env bash
# Make a CPU-only libtorch folder offline from PyPI wheels, for the `tch` feature.
#
#   scripts/setup-libtorch.sh [DEST]        # default: ~/.cache/attnres/libtorch-2.9.0-cpu
#
# torch-sys cannot download libtorch here (no internet), and the torch wheel's own
# libtorch.so pulls in CUDA. So we take libtorch_cpu.so, libc10.so and libgomp from the
# wheel, the two small CUDA runtime libraries that libtorch_cpu.so links against, and put
# an empty stub libtorch.so beside them. The script is idempotent: a complete folder is
# left alone. For a GPU build, use `make build-cuda` instead (docs/gpu.md).
set -euo pipefail

cache=${ATTNRES_CACHE:-$HOME/.cache/attnres}
version=2.9.0
dest=${1:-$cache/libtorch-$version-cpu}
wheels=$cache/wheels

if [ -f "$dest/.complete" ]; then
  echo "libtorch: $dest is already complete (delete it to rebuild)"
  echo "$dest"
  exit 0
fi

mkdir -p "$wheels"
echo "libtorch: fetching wheels into $wheels" >&2
pip_dl() { pip download --quiet --no-deps -d "$wheels" "$@" >&2; }
pip_dl torch==2.9.0 nvidia-cuda-runtime-cu12==12.8.90 nvidia-cuda-cupti-cu12==12.8.90

torch_whl=$(ls "$wheels"/torch-"$version"-cp3*-manylinux*_x86_64.whl | head -n 1)
mkdir -p "$(dirname "$dest")"
tmp=$(mktemp -d "${dest}.tmp.XXXXXX")
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/unzip" "$tmp/out/lib"

echo "libtorch: unpacking $(basename "$torch_whl")" >&2
unzip -q "$torch_whl" 'torch/include/*' torch/lib/libtorch_cpu.so torch/lib/libc10.so \
  torch/lib/libgomp.so.1 -d "$tmp/unzip"
mv "$tmp/unzip/torch/include" "$tmp/out/include"
mv "$tmp/unzip/torch/lib/"* "$tmp/out/lib/"
for whl in "$wheels"/nvidia_*.whl; do
  case "$(basename "$whl")" in
    nvidia_cuda_runtime_cu12-12.8.90*|nvidia_cuda_cupti_cu12-12.8.90*) ;;
    *) continue ;;
  esac
  unzip -q -o "$whl" 'nvidia/*/lib/*.so*' -d "$tmp/unzip"
done
find "$tmp/unzip/nvidia" -name '*.so*' -exec mv -f {} "$tmp/out/lib/" \; 2>/dev/null || true
# libcupti's helpers are not needed by libtorch_cpu; keep the folder small.
rm -f "$tmp/out/lib/"libnvperf_* "$tmp/out/lib/"libcheckpoint.so "$tmp/out/lib/"libpcsamplingutil.so
echo 'void attnres_libtorch_stub(void) {}' > "$tmp/stub.c"
gcc -shared -fPIC -o "$tmp/out/lib/libtorch.so" "$tmp/stub.c"
echo "$version" > "$tmp/out/build-version"
touch "$tmp/out/.complete"
rm -rf "$dest"
mv "$tmp/out" "$dest"
echo "libtorch: made $dest ($(du -sh "$dest" | cut -f1))" >&2
echo "$dest"
