// Runs the in-page parser (docs_src/_static/live/parser.js with onnxruntime-web) over a file, for tests/test_onnx_parser.py
// to compare with the Python parser.
//   node tests/js/parser_check.mjs MODEL_DIR SENTENCES
//     MODEL_DIR: what `onnx_parser.export_parser` wrote (meta.json, parser.onnx, spm.model)
//     SENTENCES: one JSON value per line, a sentence (a string, tokenized by ptb_tokenize.js) or its words (an array)
//     -> one JSON object per line: {"words", "tags", "bracketed", "score"}
// The parsing rate (sentences and words per second, loading, reading and printing left out) goes to stderr.
import {readFileSync, writeSync} from "node:fs";
import {join} from "node:path";
import * as ort from "onnxruntime-web";
import {createParser} from "../../docs_src/_static/live/parser.js";

const [dir, input] = process.argv.slice(2);
if (!dir || !input) { console.error("usage: node tests/js/parser_check.mjs MODEL_DIR SENTENCES"); process.exit(2); }
ort.env.wasm.numThreads = 1;
const parser = await createParser(ort, name => readFileSync(join(dir, name)));
const items = readFileSync(input, "utf8").split("\n").filter(l => l !== "").map(l => JSON.parse(l));
const out = [];
let words = 0;
const t0 = performance.now();
for (const s of items) {
  const r = await parser.parse(s);
  words += r.words.length;
  out.push(JSON.stringify({words: r.words, tags: r.tags, bracketed: r.bracketed, score: r.score}));
}
const seconds = (performance.now() - t0) / 1000;
writeSync(1, out.join("\n") + (out.length ? "\n" : ""));
console.error(`${items.length} sentences (${words} words) parsed in ${seconds.toFixed(2)} s: ` +
              `${(items.length / seconds).toFixed(1)} sentences, ${Math.round(words / seconds)} words per second`);
