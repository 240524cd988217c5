/* The shipped chart parser in the page: Penn Treebank words (ptb_tokenize.js), their SentencePiece pieces (spm.js), one
 * ONNX graph (made from pretrained/ptb-chart by the package's `onnx_parser.export_parser`), CKY and the tree (cky.js).
 *
 *   parser.onnx  pieces (N+2, C) int64: row 0 BOS, rows 1..N the pieces of each word, row N+1 EOS, padded with PAD
 *                -> chart (N+1, N+1, L) float32: label scores of span (i, j), i < j, label 0 empty (0); 0 where i >= j
 *                   tags (N, T) float32: each word's part-of-speech tag scores
 *   meta.json    labels, tags, piece ids, the longest sentence, the files' sizes and sha256
 *
 *   import * as ort from "onnxruntime-web";
 *   import {createParser} from "./parser.js";
 *   const parser = await createParser(ort, "/_static/models/ptb-chart/");      // a base URL, or load(name) -> bytes
 *   const r = await parser.parse("The cat sat on the mat.");
 *   r.words       // ["The", "cat", "sat", "on", "the", "mat", "."]
 *   r.bracketed   // "(TOP (S (NP (DT The) (NN cat)) (VP (VBD sat) (PP (IN on) (NP (DT the) (VBN mat)))) (. .)))"
 *                 // (the shipped model's tags: "mat" gets VBN; the Python parser says the same)
 *
 * `parse` also takes the words themselves (an array: already Penn Treebank words), and returns the tags, the labelled
 * spans, the tree ({label, children}), the tree's score, and with {chart: true} the chart's data and dims.
 * Every step is the Python parser's (`chart_batch`, `ChartParser`, `cky`, `spans_to_tree` in `chart_parse`), and
 * tests/test_onnx_parser.py checks that the two give the same trees.
 */
import {SentencePiece} from "./spm.js";
import {ptbTokenize} from "./ptb_tokenize.js";
import {cky, spansToTree, treeToString} from "./cky.js";

/**
 * The graph's input for one sentence, as `chart_batch` makes it: BOS, each word's pieces (at most `max_pieces` of them),
 * EOS, every row padded with PAD to the longest. Returns {data: BigInt64Array, dims: [N+2, C]}.
 */
export function pieceIds(sp, words, {bos_id: bos, eos_id: eos, pad_id: pad, max_pieces: maxPieces}) {
  const units = words.map(w => sp.encode(w).slice(0, maxPieces));
  const C = Math.max(...units.map(u => u.length));
  const rows = [[bos], ...units, [eos]];
  const data = new BigInt64Array(rows.length * C).fill(BigInt(pad));
  rows.forEach((r, k) => r.forEach((id, c) => { data[k * C + c] = BigInt(id); }));
  return {data, dims: [rows.length, C]};
}

/** The index of the largest value of each row of a (rows, cols) array; a tie goes to the first, as torch's argmax. */
export function argmaxRows(data, rows, cols) {
  return Array.from({length: rows}, (_, r) => {
    let arg = 0;
    for (let c = 1; c < cols; c++) if (data[r * cols + c] > data[r * cols + arg]) arg = c;
    return arg;
  });
}

const REQUIRED = ["labels", "tags", "pieces", "max_words", "files"];

export class Parser {
  constructor(ort, meta, sp, session) {
    for (const k of REQUIRED) if (meta[k] === undefined) throw new Error(`meta.json: ${k} is missing`);
    Object.assign(this, {ort, meta, sp, session});
  }

  /** The Penn Treebank words of a sentence: a string is tokenized (ptb_tokenize.js), an array is taken as it is. */
  words(sentence) {
    if (Array.isArray(sentence)) return sentence.map(String);
    if (typeof sentence !== "string") throw new TypeError("parse: expected a sentence (a string) or its words (an array)");
    return ptbTokenize(sentence);
  }

  /** Parse one sentence: {words, tags, spans: [[i, j, label]], tree, bracketed, score} (and {chart: {data, dims}} on request). */
  async parse(sentence, {chart = false} = {}) {
    const words = this.words(sentence), n = words.length;
    if (!n) throw new RangeError("There are no words to parse: type a sentence.");
    if (words.some(w => !w || /\s/.test(w))) throw new RangeError("parse: a word is empty or holds a space");
    if (n > this.meta.max_words) throw new RangeError(`That is ${n} words; this parser takes at most ${this.meta.max_words}.`);
    const x = pieceIds(this.sp, words, this.meta.pieces);
    const out = await this.session.run({pieces: new this.ort.Tensor("int64", x.data, x.dims)});
    const L = this.meta.labels.length, T = this.meta.tags.length;
    if (out.chart.dims.join() !== [n + 1, n + 1, L].join()) throw new Error(`parser.onnx: a chart of dims ${out.chart.dims}; expected ${[n + 1, n + 1, L]}`);
    const best = cky(out.chart.data, n, L);
    const tags = argmaxRows(out.tags.data, n, T).map(t => this.meta.tags[t]);
    const spans = best.spans.map(([i, j, l]) => [i, j, this.meta.labels[l]]);
    const tree = spansToTree(words, tags, spans);
    const r = {words, tags, spans, tree, bracketed: treeToString(tree), score: best.score};
    if (chart) r.chart = {data: out.chart.data, dims: [...out.chart.dims]};
    return r;
  }
}

/** Bytes of `name` from a base URL (fetch) or a loader function `load(name) -> Uint8Array | ArrayBuffer` (maybe async). */
function loaderOf(source) {
  if (typeof source === "function") return async name => {
    const b = await source(name);
    return b instanceof Uint8Array ? b : new Uint8Array(b);
  };
  const base = String(source).endsWith("/") ? String(source) : `${source}/`;
  return async name => {
    const res = await fetch(new URL(name, new URL(base, globalThis.location?.href)));
    if (!res.ok) throw new Error(`${base}${name}: the server answered ${res.status}`);
    return new Uint8Array(await res.arrayBuffer());
  };
}

/** Load the parser: meta.json, the tokenizer and the graph, from a base URL or through `load(name)`. */
export async function createParser(ort, source, {sessionOptions = {}} = {}) {
  const load = loaderOf(source);
  const meta = JSON.parse(new TextDecoder().decode(await load("meta.json")));
  const sp = SentencePiece.fromBytes(await load(meta.files.tokenizer.name));
  const opts = {executionProviders: ["wasm"], graphOptimizationLevel: "all", ...sessionOptions};
  const session = await ort.InferenceSession.create(await load(meta.files.graph.name), opts);
  return new Parser(ort, meta, sp, session);
}
