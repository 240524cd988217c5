// Runs the in-page translator (docs_src/_static/live/translator.js over onnxruntime-web, wasm, one thread) on a file,
// for tests/test_live_models.py to compare with at-translate.
//   node tests/js/translate_check.mjs MODEL_DIR INPUT [--beam K]   MODEL_DIR: an exported model (meta.json, encoder.onnx,
//        decoder.onnx, the tokenizer); INPUT: one sentence per line -> one translation per line on stdout.
// Timing (model load, then sentences per second) goes to stderr as one JSON line.
import {readFileSync, writeSync} from 'node:fs';
import {join} from 'node:path';
import * as ort from 'onnxruntime-web';
import {Translator} from '../../docs_src/_static/live/translator.js';

const args = process.argv.slice(2);
const beamAt = args.indexOf('--beam');
const beam = beamAt >= 0 ? Number(args.splice(beamAt, 2)[1]) : 4;
const [dir, input] = args;
if (!dir || !input || !Number.isInteger(beam) || beam < 1) {
  console.error('usage: node tests/js/translate_check.mjs MODEL_DIR INPUT [--beam K]');
  process.exit(2);
}
ort.env.wasm.numThreads = 1;
const t0 = performance.now();
const tr = await Translator.load(ort, async f => new Uint8Array(readFileSync(join(dir, f))));
const t1 = performance.now();
const lines = readFileSync(input, 'utf8').split('\n');
if (lines[lines.length - 1] === '') lines.pop();
const out = [];
for (const line of lines) out.push((await tr.translate(line, {beamSize: beam})).text);
const t2 = performance.now();
writeSync(1, out.join('\n') + (out.length ? '\n' : ''));
console.error(JSON.stringify({load_s: (t1 - t0) / 1000, translate_s: (t2 - t1) / 1000, sentences: lines.length, beam}));
