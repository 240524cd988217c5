// Runs docs_src/_static/live/spm.js over a file, for tests/test_live_tokenizer.py to compare with Python's sentencepiece.
//   node tests/js/spm_check.mjs MODEL TEXTS          TEXTS: one JSON string per line ->
//        one JSON object per line: {"ids": encode(s), "pieces": encodeAsPieces(s), "text": decode(encode(s))}
//   node tests/js/spm_check.mjs MODEL IDS --decode   IDS: one JSON list of ids per line -> one JSON string per line: decode(ids)
// The encoding rate (sentences per second, reading and printing left out) goes to stderr.
import {readFileSync, writeSync} from "node:fs";
import {SentencePiece} from "../../docs_src/_static/live/spm.js";

const [modelPath, inputPath, mode] = process.argv.slice(2);
if (!modelPath || !inputPath || (mode && mode !== "--decode")) {
  console.error("usage: node tests/js/spm_check.mjs MODEL INPUT [--decode]");
  process.exit(2);
}
const sp = SentencePiece.fromBytes(readFileSync(modelPath));
const items = readFileSync(inputPath, "utf8").split("\n").filter(l => l !== "").map(l => JSON.parse(l));
const t0 = performance.now();
const out = mode === "--decode"
  ? items.map(ids => JSON.stringify(sp.decode(ids)))
  : items.map(s => { const ids = sp.encode(s); return JSON.stringify({ids, pieces: sp.encodeAsPieces(s), text: sp.decode(ids)}); });
const seconds = (performance.now() - t0) / 1000;
writeSync(1, out.join("\n") + (out.length ? "\n" : ""));
console.error(`${items.length} ${mode === "--decode" ? "id lists decoded" : "sentences encoded (and pieces, decode)"} in ` +
              `${seconds.toFixed(2)} s: ${Math.round(items.length / Math.max(seconds, 1e-9))} per second`);
