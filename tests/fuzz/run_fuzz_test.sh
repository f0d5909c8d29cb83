#!/bin/sh
# One ctest of a harness: every regression input replayed whole (libFuzzer
# truncates corpus files to -max_len, so they are passed as files), then the
# seed corpus and a short bounded fuzz run.
# usage: run_fuzz_test.sh HARNESS_BINARY NAME SOURCE_DIR WORK_DIR SECONDS
set -eu
bin=$1 name=$2 src=$3 work=$4 secs=$5
rm -rf "$work"
mkdir -p "$work/corpus"
dict=""
case $name in
  safetensors|model|optim) dict=-dict=$src/dict/safetensors.dict ;;
  npy) dict=-dict=$src/dict/npy.dict ;;
  image|image_full) dict=-dict=$src/dict/image.dict ;;
  pth|pickle) dict=-dict=$src/dict/pickle.dict ;;
  hfconfig) dict=-dict=$src/dict/json.dict ;;
esac
# The whole image path runs with the real size limits: a 33 KB PNG can hold 16384 x 16384 1-bit
# pixels (268 M, scaled down while read), ~0.4 s in a release build and several seconds under
# ASan with libFuzzer's comparison tracing; its per-input timeout allows for that.
timeout=10
[ "$name" = image_full ] && timeout=60
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=1:allocator_may_return_null=1}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
regs=$(find "$src/regressions/$name" -type f ! -name '*.md' 2>/dev/null | sort)
if [ -n "$regs" ]; then
  echo "== replaying $(echo "$regs" | wc -l) regression input(s)"
  # shellcheck disable=SC2086
  if ! "$bin" -timeout=$timeout -rss_limit_mb=2560 $regs >"$work/regressions.log" 2>&1; then
    cat "$work/regressions.log"
    echo "FAILED on a regression input"
    exit 1
  fi
fi
echo "== seed corpus, then $secs s of fuzzing"
# shellcheck disable=SC2086
exec "$bin" -seed=1 -max_total_time="$secs" -timeout=$timeout -rss_limit_mb=2560 -max_len=65536 -print_final_stats=1 \
  -artifact_prefix="$work/" $dict "$work/corpus" "$src/corpus/$name"
