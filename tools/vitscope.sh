#!/usr/bin/env bash
# ViTScope quick start.
#   tools/vitscope.sh run   install what is missing, build, launch the app on the
#                           embedded default model and a bundled image
#   tools/vitscope.sh test  install what is missing, build, run the whole test suite,
#                           then the unit tests and fuzz harnesses built with ASan +
#                           UBSan by clang in $BUILD/san (VITSCOPE_SANITIZE=0 skips it)
# Works on a fresh Debian bookworm machine (root, or a user with sudo).
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${VITSCOPE_BUILD_DIR:-$ROOT/build}
# ccache (CMakeLists.txt uses it when installed): paths relative to the checkout, so that a fresh clone in
# another folder (CI) finds what the last build compiled
export CCACHE_BASEDIR=${CCACHE_BASEDIR:-$ROOT} CCACHE_NOHASHDIR=${CCACHE_NOHASHDIR:-1}

PACKAGES=(
  build-essential cmake pkg-config git
  libimgui-dev libglfw3-dev libgl-dev libgl1-mesa-dri libstb-dev
  xtensor-dev libxtensor-dev xtl-dev libxsimd-dev libopenblas-dev libdnnl-dev
  nlohmann-json3-dev libzip-dev zlib1g-dev libcli11-dev libgtest-dev
  libjpeg62-turbo-dev libpng-dev libwebp-dev libcurl4-openssl-dev ca-certificates clang libclang-rt-14-dev libomp-dev ccache
  python3-torch python3-torchvision python3-numpy python3-pil
  dataset-fashion-mnist xvfb xauth fonts-dejavu-core
)

install_missing() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
  done
  if ((${#missing[@]})); then
    echo "==> installing ${#missing[@]} Debian packages: ${missing[*]}"
    local SUDO=""
    [[ $(id -u) -ne 0 ]] && SUDO=sudo
    $SUDO apt-get update -q
    DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
  fi
}

build() {
  echo "==> building in $BUILD"
  cmake -S "$ROOT" -B "$BUILD" -DCMAKE_BUILD_TYPE=Release >/dev/null
  cmake --build "$BUILD" -j"$(nproc)"
}

# The sanitizer build: its own directory (clang, every target instrumented),
# only the unit tests and the fuzz harnesses; ctest there replays every
# harness's corpus and regressions and fuzzes each for a few seconds.
sanitize() {
  local SAN=$BUILD/san t0=$SECONDS rc=0
  echo "==> sanitizer build (clang, ASan + UBSan, libFuzzer) in $SAN"
  cmake -S "$ROOT" -B "$SAN" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
    -DCMAKE_CXX_COMPILER=clang++ -DVITSCOPE_FUZZ=ON -DVITSCOPE_BUILD_APP=OFF >/dev/null
  cmake --build "$SAN" -j"$(nproc)" --target unit_tests fuzzers
  (cd "$SAN" && ctest --output-on-failure -j"$(nproc)" "$@") || rc=$?
  echo "==> sanitizer build and tests took $((SECONDS - t0)) s"
  return $rc
}

cmd=${1:-run}
shift || true
case "$cmd" in
  run)
    install_missing
    build
    # the window opens on the scenes model and a bundled scene by itself (or on what was open last time);
    # the first launch in Learn mode
    sample="$ROOT/assets/samples/scenes/00003.png"
    if [[ -x "$BUILD/vitscope" ]]; then
      if [[ -z "${DISPLAY:-}${WAYLAND_DISPLAY:-}" ]]; then
        echo "==> no display: rendering the app headless to vitscope-screenshot.png instead"
        exec xvfb-run -a -s "-screen 0 1600x1000x24" "$BUILD/vitscope" --image "$sample" --learn 0 --learn-time 2 \
          --screenshot vitscope-screenshot.png "$@"
      fi
      exec "$BUILD/vitscope" "$@"
    fi
    exec "$BUILD/vitscope-cli" trace --model scenes --image "$sample" --out vitscope-trace.npz "$@"
    ;;
  test)
    install_missing
    build
    status=0
    (cd "$BUILD" && ctest --output-on-failure -j"$(nproc)" "$@") || status=$?
    if [[ ${VITSCOPE_SANITIZE:-1} != 0 ]]; then
      sanitize "$@" || status=$?
    fi
    exit $status
    ;;
  *)
    echo "usage: tools/vitscope.sh run|test [args...]" >&2
    exit 2
    ;;
esac
