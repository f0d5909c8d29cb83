#!/usr/bin/env bash
# Long fuzzing runs: every libFuzzer harness (or the named ones), one after
# the other, for MINUTES each, with ASan + UBSan.
#   tools/fuzz.sh MINUTES [HARNESS...]     harnesses: safetensors model npy image idx labels optim pth
#                                          hfconfig pickle settings input image_full
# The corpus grows in $BUILD/san/fuzz/corpus/<harness> (kept between runs);
# crashes, leaks, timeouts and out-of-memory inputs land in
# $BUILD/san/fuzz/findings/<harness>/. Minimize one with
#   $BUILD/san/tests/fuzz/fuzz_<harness> -minimize_crash=1 -runs=100000 FILE
# and add it to tests/fuzz/regressions/<harness>/ with the fix.
set -euo pipefail
cd "$(dirname "$0")/.."
ROOT=$PWD
BUILD=${VITSCOPE_BUILD_DIR:-$ROOT/build}
SAN=$BUILD/san
minutes=${1:?usage: tools/fuzz.sh MINUTES [HARNESS...]}
shift
harnesses=("$@")
((${#harnesses[@]})) || harnesses=(safetensors model npy image idx labels optim pth hfconfig pickle settings input image_full)

cmake -S "$ROOT" -B "$SAN" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DCMAKE_C_COMPILER=clang \
  -DCMAKE_CXX_COMPILER=clang++ -DVITSCOPE_FUZZ=ON -DVITSCOPE_BUILD_APP=OFF >/dev/null
cmake --build "$SAN" -j"$(nproc)" --target fuzzers >/dev/null

export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
src=$ROOT/tests/fuzz
printf '%-12s %12s %8s %8s %9s  %s\n' harness executions cov ft findings log
for h in "${harnesses[@]}"; do
  corpus=$SAN/fuzz/corpus/$h findings=$SAN/fuzz/findings/$h log=$SAN/fuzz/$h.log
  mkdir -p "$corpus" "$findings"
  dict=()
  case $h in
    safetensors|model|optim) dict=(-dict="$src/dict/safetensors.dict") ;;
    npy) dict=(-dict="$src/dict/npy.dict") ;;
    image|image_full) dict=(-dict="$src/dict/image.dict") ;;
    pth|pickle) dict=(-dict="$src/dict/pickle.dict") ;;
    hfconfig) dict=(-dict="$src/dict/json.dict") ;;
  esac
  timeout=10
  [[ $h == image_full ]] && timeout=60  # real size limits: 268 M pixels take seconds under ASan (run_fuzz_test.sh)
  # -fork=1: a finding is saved and the run goes on to the end of its time.
  "$SAN/tests/fuzz/fuzz_$h" -fork=1 -ignore_crashes=1 -ignore_timeouts=1 -ignore_ooms=1 \
    -max_total_time=$((minutes * 60)) -timeout=$timeout -rss_limit_mb=2560 -max_len=65536 -print_final_stats=1 \
    -artifact_prefix="$findings/" "${dict[@]}" "$corpus" "$src/corpus/$h" \
    $([[ -d $src/regressions/$h ]] && echo "$src/regressions/$h") >"$log" 2>&1 || true
  execs=$(grep -o 'stat::number_of_executed_units: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*$' || true)
  [[ -n $execs ]] || execs=$(grep -o '^#[0-9]*' "$log" | tail -1 | tr -d '#')
  cov=$(grep -o 'cov: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo '?')
  ft=$(grep -o 'ft: [0-9]*' "$log" | tail -1 | grep -o '[0-9]*' || echo '?')
  found=$(find "$findings" -type f | wc -l)
  printf '%-12s %12s %8s %8s %9s  %s\n' "$h" "${execs:-?}" "$cov" "$ft" "$found" "$log"
done
