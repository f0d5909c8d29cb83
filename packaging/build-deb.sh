#!/usr/bin/env bash
# Builds the Debian package in build/package/: a separate Release build without
# -march=native (packaged binaries must run on any x86-64) and without tests.
#   packaging/build-deb.sh   ->  build/package/vitscope_<version>_amd64.deb   (VITSCOPE_DEB_BUILD_DIR to change)
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD=${VITSCOPE_DEB_BUILD_DIR:-$PWD/build/package}
cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DVITSCOPE_NATIVE=OFF -DVITSCOPE_BUILD_TESTS=OFF >/dev/null
cmake --build "$BUILD" -j"$(nproc)"
(cd "$BUILD" && cpack -G DEB)
ls -l "$BUILD"/vitscope_*.deb
