#!/usr/bin/env bash
# Regenerates the README's screenshots with the app's own headless mode.
set -euo pipefail
cd "$(dirname "$0")/.."
APP=${1:-build/vitscope}
OUT=assets/screenshots
mkdir -p "$OUT"
# shot NAME [ARGS...]: at 1600x1000; SIZE=WxH shot ...: at that size (the walk-through's pictures are
# at 1280x800, the smallest window the layouts are made for)
# (the window opens on the scenes model; a shot that names no --model is of the embedded Fashion-MNIST one)
shot() {
  local name=$1; shift
  local size=${SIZE:-1600x1000}
  local model=()
  [[ " $* " == *" --model "* ]] || model=(--model default)
  xvfb-run -a -s "-screen 0 2560x1600x24" "$APP" --width "${size%x*}" --height "${size#*x}" "${model[@]}" "$@" --screenshot "$OUT/$name.png"
  echo "wrote $OUT/$name.png"
}
IMG=assets/samples/9_ankle_boot_test0.png
shot pattern        --image "$IMG" --stage attn.pattern --layer 5 --head 1 --patch 38 --overlay cls
shot layernorm      --image "$IMG" --stage blocks.2.ln2.normalized --overlay rollout --layer 5
shot attention_maps --image assets/samples/8_bag_test18.png --tab 1 --overlay cls --layer 5
shot changes        --image "$IMG" --stage blocks.3.mlp.post --no-affine --tab 2
shot rollout        --image assets/samples/1_trouser_test2.png --stage input --overlay rollout --layer 5 --opacity 0.8
shot query          --image "$IMG" --stage input --query 28 --layer 3 --head 1 --opacity 0.85
shot cell_math      --image "$IMG" --stage blocks.1.attn.pattern --head 2 --cell 0,3
shot bug_scale      --image "$IMG" --stage blocks.1.attn.pattern --head 1 --bug-scale-after-softmax --tab 2
shot logit_lens     --image "$IMG" --tab 4
shot positions      --image "$IMG" --tab 5 --patch 10
shot filters        --image "$IMG" --tab 6
shot distance       --image "$IMG" --tab 7 --distance-images 100 --layer 5 --head 0 --stage blocks.5.attn.pattern
shot patches        --image "$IMG" --tab 8 --patch 38
shot patches_rgb    --image "$IMG" --model vit-ti16 --tab 8 --patch 100
shot patches_bug    --image "$IMG" --tab 8 --bug-reshape-patches --patch 17
shot map            --image "$IMG" --tab 9 --stage blocks.2.attn.pattern
shot map_vit_b16    --image "$IMG" --model vit-b16 --tab 9 --stage blocks.11.mlp.post --bug-reshape-patches
# the tour of lessons: the scenes model, "Take the object away" answered (a second pass without its patches)
shot tour           --model scenes --image assets/samples/scenes/00006.png --tour 13 --learn-answer stays
shot interventions  --image "$IMG" --tab 13 --ablate-head 4.2 --overlay cls --layer 5
shot knockout       --image "$IMG" --tab 1 --ablate-head 4.2 --drop-patches 38,39 --overlay cls --layer 5
SIZE=1280x800 shot window_1280    --image "$IMG" --stage blocks.0.attn.pattern --head 1 --patch 38 --overlay cls --layer 0
SIZE=1280x800 shot layernorm_1280 --image "$IMG" --stage blocks.0.ln1.normalized
# the window as it opens: the scenes model on a bundled scene, the object's box from labels.json
SIZE=1280x800 shot scenes_1280 --model scenes --image assets/samples/scenes/00003.png
# Learn mode (issue 38), as a first launch opens it: the scenes model on a bundled scene
for s in "model 0 2.0" "patches 2 2.2" "ln 6 2.0" "scores 8 4" "softmax 9 4" "probs 18 4"; do
  set -- $s
  SIZE=1280x800 shot "learn_$1" --model scenes --image assets/samples/scenes/00003.png --learn "$2" --learn-time "$3"
done
# a frame strip of one step (pixels become patches) at five moments of its animation
STRIP=()
for t in 0.3 1.0 1.7 2.5 4.0; do
  SIZE=1280x800 shot "strip_$t" --model scenes --image assets/samples/scenes/00003.png --learn 2 --learn-time "$t"
  STRIP+=("$OUT/strip_$t.png")
done
/usr/bin/python3 - "$OUT/learn_strip.png" "${STRIP[@]}" <<'PY'
import sys
from PIL import Image
out, frames = sys.argv[1], [Image.open(p).convert("RGB") for p in sys.argv[2:]]
# the picture only (left of the narration, under the controls), each frame 400 px wide, side by side
crops = [f.crop((0, 62, 896, 766)).resize((400, 314), Image.LANCZOS) for f in frames]
strip = Image.new("RGB", (400 * len(crops) + 8 * (len(crops) - 1), 314), (40, 40, 40))
for i, c in enumerate(crops):
    strip.paste(c, (i * 408, 0))
strip.save(out, optimize=True)
print("wrote", out)
PY
rm -f "${STRIP[@]}"
