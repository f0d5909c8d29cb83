#!/bin/bash
# Every minimized input under regressions/<kind>/ through the release CLI, as
# a user would hit it: each must end with exit status 1 and a message naming
# the file, within 2 s of CPU time and 1 GB of address space (ulimit -t / -v;
# a 10 s wall-clock timeout catches hangs on a loaded machine). An image named
# scaled_* is one that is now read (scaled down on load): exit status 0 and a
# note naming the file, within the same limits.
# usage: run_regressions.sh VITSCOPE_CLI REGRESSIONS_DIR WORK_DIR
set -u
cli=$1 reg=$2 work=$3
rm -rf "$work"
mkdir -p "$work"
export OPENBLAS_NUM_THREADS=1 OMP_NUM_THREADS=1
fmnist=/usr/share/datasets/fashion-mnist
fail=0 n=0

# A tiny Fashion-MNIST-shaped dataset (16 blank 28x28 images) and a small real
# checkpoint trained on it (toy-rgb8 becomes 1 channel, as the optim harness's
# model), for --resume.
if [[ -d $reg/optim ]]; then
  data="$work/data"
  mkdir -p "$data"
  for set in train t10k; do
    { printf '\x00\x00\x08\x03\x00\x00\x00\x10\x00\x00\x00\x1c\x00\x00\x00\x1c'; head -c $((16 * 784)) /dev/zero; } \
      >"$data/$set-images-idx3-ubyte"
    { printf '\x00\x00\x08\x01\x00\x00\x00\x10'; head -c 16 /dev/zero; } >"$data/$set-labels-idx1-ubyte"
  done
  "$cli" train --config toy-rgb8 --data "$data" --epochs 1 --batch 8 --threads 1 --out "$work/toy.safetensors" \
    >/dev/null 2>&1 || { echo "could not make the toy checkpoint"; exit 1; }
fi

check() {  # check FILE_NAMED_IN_MESSAGE CLI_ARGS...   (exit status $want, 1 unless set)
  local named=$1; shift
  local expect=${want:-1}
  local t0 t1 rc out
  t0=$(date +%s%N)
  out=$( (ulimit -v 1048576 -t 2; exec timeout 10 "$cli" "$@") 2>&1 >/dev/null)
  rc=$?
  t1=$(date +%s%N)
  n=$((n + 1))
  local ms=$(((t1 - t0) / 1000000))
  local secs
  secs=$(printf '%d.%03d' $((ms / 1000)) $((ms % 1000)))
  if [[ $rc -ne $expect || $out != *"$named"* ]]; then
    echo "FAIL $named: exit $rc (${secs} s): ${out:0:400}"
    fail=1
  else
    printf 'ok   %-70s %5.2f s  %s\n' "${named#"$reg"/}" "$secs" "${out:0:110}"
  fi
}

shopt -s nullglob
for f in "$reg"/safetensors/* "$reg"/model/*; do
  [[ $f == *.md ]] && continue
  check "$f" info --model "$f"
done
for f in "$reg"/pth/*; do
  [[ $f == *.md ]] && continue
  check "$f" info --model "$f"
done
for f in "$reg"/image/*; do
  [[ $f == *.md ]] && continue
  want=1
  [[ $(basename "$f") == scaled_* ]] && want=0
  want=$want check "$f" trace --model fmnist --image "$f" --out "$work/x.npz"
done
for f in "$reg"/npy/*; do
  [[ $f == *.md ]] && continue
  check "$f" trace --model toy-rgb8 --input "$f" --out "$work/x.npz"
done
for f in "$reg"/labels/*; do
  [[ $f == *.md ]] && continue
  check "$f" info --model default --labels "$f"
done
for f in "$reg"/idx/*; do  # harness format: 2 bytes (little-endian) saying where the image file ends
  [[ $f == *.md ]] && continue
  d="$work/idx-$(basename "$f")"
  mkdir -p "$d"
  cut=$(od -An -tu2 -N2 "$f" | tr -d ' ')
  size=$(stat -c %s "$f")
  cut=$((size > 2 ? cut % (size - 1) : 0))
  tail -c +3 "$f" | head -c "$cut" >"$d/t10k-images-idx3-ubyte"
  tail -c +3 "$f" | tail -c +$((cut + 1)) >"$d/t10k-labels-idx1-ubyte"
  check "$d/t10k-" eval --model fmnist --data "$d" --limit 10
done
for f in "$reg"/optim/*; do
  [[ $f == *.md ]] && continue
  m="$work/resume-$(basename "$f").safetensors"
  cp "$work/toy.safetensors" "$m"
  cp "$f" "$m.optim"
  check "$m.optim" train --resume "$m" --data "$data" --epochs 2 --batch 8 --threads 1 --out "$work/out.safetensors"
done
echo "$n regression inputs through $cli"
exit $fail
