// One llama.cpp (CPU) measurement through node-llama-cpp, for
// bench/compare-llamacpp.sh. Same synthetic prompt as `baton bench` (BOS,
// then ids 3..n_vocab-1 from the same LCG), greedy, EOS ignored.
//
//   node bench.mjs MODEL.gguf THREADS PROMPT_TOKENS GEN_TOKENS [--info]
//
// Prints one line: `llamacpp threads=N prefill_tok_s=X decode_tok_s=Y load_s=Z`
// where prefill = PROMPT_TOKENS / (time until the first generated token) and
// decode = (GEN_TOKENS - 1) / (time of the remaining steps), as baton bench
// counts them. --info first prints `# llama.cpp: ...` lines (release, build,
// GPU type, system info of the loaded CPU backend).
import { getLlama, LlamaLogLevel } from "node-llama-cpp";

const [modelPath, threadsArg, promptArg, genArg, infoArg] = process.argv.slice(2);
if (!modelPath || !threadsArg || !promptArg || !genArg) {
    console.error("usage: node bench.mjs MODEL THREADS PROMPT_TOKENS GEN_TOKENS");
    process.exit(2);
}
const threads = Number(threadsArg), nPrompt = Number(promptArg), nGen = Number(genArg);
if (!(threads >= 1) || !(nPrompt >= 1) || !(nGen >= 2)) {
    console.error("bench.mjs: THREADS >= 1, PROMPT_TOKENS >= 1, GEN_TOKENS >= 2");
    process.exit(2);
}

const now = () => Number(process.hrtime.bigint()) / 1e9;
const tLoad0 = now();
const llama = await getLlama({ gpu: false, build: "never", maxThreads: threads,
                               logLevel: LlamaLogLevel.error, progressLogs: false });
if (infoArg === "--info") {
    const rel = llama.llamaCppRelease;
    console.log(`# llama.cpp: release ${rel.release} (${rel.repo}), build ${llama.buildType}, ` +
                `gpu ${llama.gpu}, cpuMathCores ${llama.cpuMathCores}`);
    console.log(`# llama.cpp system info: ${llama.systemInfo}`);
}
const model = await llama.loadModel({ modelPath, gpuLayers: 0, useMmap: true });
const nVocab = model.tokens.vocabularySize ?? model.fileInfo.metadata?.tokenizer?.ggml?.tokens?.length;
const context = await model.createContext({
    contextSize: nPrompt + nGen + 8,
    batchSize: Math.min(512, nPrompt + nGen + 8),
    threads: { ideal: threads, min: threads },
    sequences: 1,
});
const seq = context.getSequence();
const tLoad = now() - tLoad0;

// the LCG of src/cli/baton_bench.c, in 32-bit unsigned arithmetic
const ids = [1];
let x = 12345;
for (let i = 1; i < nPrompt; i++) {
    x = (Math.imul(x, 1103515245) + 12345) >>> 0;
    ids.push(3 + ((x >>> 8) % (nVocab - 3)));
}

const it = seq.evaluate(ids, { temperature: 0 });
const t0 = now();
let r = await it.next();
const tPrefill = now() - t0;
const t1 = now();
let steps = 0;
for (; steps < nGen - 1 && !r.done; steps++)
    r = await it.next();
const tDecode = now() - t1;
await it.return();
if (steps !== nGen - 1) {
    console.error(`bench.mjs: generation stopped after ${steps + 1} tokens`);
    process.exit(1);
}
console.log(`llamacpp threads=${threads} prefill_tok_s=${(nPrompt / tPrefill).toFixed(3)} ` +
            `decode_tok_s=${(steps / tDecode).toFixed(3)} load_s=${tLoad.toFixed(3)} ` +
            `cpu_threads=${context.currentThreads}`);
await context.dispose();
await model.dispose();
await llama.dispose();
