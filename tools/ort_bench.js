// Times ONNX Runtime (npm onnxruntime-node) on one .onnx model, in its best CPU
// configuration: all graph optimisations, N intra-op threads, one inter-op
// thread (the graph is a chain). Driven by tools/bench.py.
//   node ort_bench.js MODEL.onnx C S RUNS WARMUP THREADS
// Prints: ort_ms=MEDIAN min_ms=MIN peak_mb=PEAK_RSS_OF_THIS_NODE_PROCESS (VmHWM)
const ort = require("onnxruntime-node");

async function main() {
  const [model, C, S, runs, warmup, threads] = process.argv.slice(2);
  const c = +C, s = +S;
  const session = await ort.InferenceSession.create(model, {
    executionProviders: ["cpu"],
    graphOptimizationLevel: "all",
    intraOpNumThreads: +threads,
    interOpNumThreads: 1,
    executionMode: "sequential",
  });
  const data = new Float32Array(c * s * s);
  let seed = 1;
  for (let i = 0; i < data.length; ++i) {  // deterministic pseudo-normal input
    seed = (seed * 1103515245 + 12345) % 2147483648;
    data[i] = (seed / 2147483648 - 0.5) * 3.4;
  }
  const feeds = { [session.inputNames[0]]: new ort.Tensor("float32", data, [1, c, s, s]) };
  const ms = [];
  for (let r = 0; r < +warmup + +runs; ++r) {
    const t0 = process.hrtime.bigint();
    await session.run(feeds);
    const dt = Number(process.hrtime.bigint() - t0) / 1e6;
    if (r >= +warmup) ms.push(dt);
  }
  ms.sort((a, b) => a - b);
  // VmHWM: this process image's peak (getrusage's maxRSS survives execve, so it
  // would report the Python parent's peak).
  let peak = -1;
  try {
    const m = require("fs").readFileSync("/proc/self/status", "utf8").match(/^VmHWM:\s+(\d+)\s+kB/m);
    if (m) peak = +m[1] / 1024;
  } catch (e) {}
  console.log(`ort_ms=${ms[ms.length >> 1].toFixed(3)} min_ms=${ms[0].toFixed(3)} peak_mb=${peak.toFixed(1)}`);
}

main().catch((e) => { console.error(`ort_bench: ${e.message || e}`); process.exit(1); });
