#!/bin/sh
# Builds rocr-shim and stages the cdylib as libhsa-runtime64.so.1 (plus the link name
# libhsa-runtime64.so) in a directory for -L and LD_LIBRARY_PATH; prints the directory.
#
#   usage: tools/rocr-shim/scripts/stage-lib.sh [--release] [DIR]
#   default DIR: <target>/<profile>/rocr-shim-lib (what `cargo test -p rocr-shim` uses too)
#
#   cc -I tools/rocr-shim/include prog.c -L "$DIR" -lhsa-runtime64
#   CUSE_KFD_EMBEDDED=1 LD_LIBRARY_PATH="$DIR" ./a.out
set -eu
profile=debug
flag=
if [ "${1:-}" = "--release" ]; then
    profile=release
    flag=--release
    shift
fi
root=$(cd "$(dirname "$0")/../../.." && pwd)
target=${CARGO_TARGET_DIR:-$root/target}
dir=${1:-$target/$profile/rocr-shim-lib}
cargo build --manifest-path "$root/Cargo.toml" -p rocr-shim --lib $flag >&2
mkdir -p "$dir"
cp "$target/$profile/librocr_shim.so" "$dir/libhsa-runtime64.so.1.tmp.$$"
mv "$dir/libhsa-runtime64.so.1.tmp.$$" "$dir/libhsa-runtime64.so.1"
ln -sf libhsa-runtime64.so.1 "$dir/libhsa-runtime64.so"
echo "$dir"
