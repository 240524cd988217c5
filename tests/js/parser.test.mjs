// The in-page parser's JS against the Python parser: Penn Treebank tokenization (ptb_tokenize.js), CKY and the tree
// (cky.js, on charts whose answers tools/make_parser_fixture.py computed with annotated_transformer.parsing.spans), and the
// graph's input (parser.js's pieceIds against chart_batch). The whole path with the ONNX graph is in tests/test_onnx_parser.py.
//   node --test tests/js/
import test from "node:test";
import assert from "node:assert/strict";
import {existsSync, readFileSync} from "node:fs";
import {dirname, join} from "node:path";
import {fileURLToPath} from "node:url";
import {ptbTokenize} from "../../docs_src/_static/live/ptb_tokenize.js";
import {cky, spansToTree, treeToString} from "../../docs_src/_static/live/cky.js";
import {argmaxRows, pieceIds} from "../../docs_src/_static/live/parser.js";
import {SentencePiece} from "../../docs_src/_static/live/spm.js";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const FIXTURE = JSON.parse(readFileSync(join(ROOT, "tests", "fixtures", "parser_cky.json"), "utf8"));
const DATA = process.env.AT_DATA_DIR || join(ROOT, "..", "shared", "data");  // as tests/conftest.py finds ../shared/data

test("ptbTokenize: the treebank's conventions", () => {
  const cases = [
    ["The cat sat on the mat.", "The cat sat on the mat ."],
    ["It's not that we can't; we won't.", "It 's not that we ca n't ; we wo n't ."],
    ['"We cannot say," she said.', "`` We can not say , '' she said ."],
    ["He said: 'self-help' borrowing (about $1,000.50) isn't cheap!", "He said : ` self-help ' borrowing -LRB- about $ 1,000.50 -RRB- is n't cheap !"],
    ["Mr. Smith of Acme Corp. met AT&T and S&P at 9:30 a.m. in the U.S.", "Mr. Smith of Acme Corp. met AT&T and S&P at 9:30 a.m. in the U.S. ."],
    ["Shares of Acme Inc. rose 5% to C$12 on Friday, up 1/2 point -- a record.", "Shares of Acme Inc. rose 5 % to C$ 12 on Friday , up 1\\/2 point -- a record ."],
    ["The investors' money went to Acme Inc.", "The investors ' money went to Acme Inc ."],
    ["Was it in the '80s? Rock 'n' roll!", "Was it in the '80s ? Rock 'n' roll !"],
    ["\u201cSmart quotes\u201d \u2014 and an ellipsis\u2026 We'll see.", "`` Smart quotes '' -- and an ellipsis ... We 'll see ."],
    ["They're {braces} and [brackets] and *stars*.", "They 're -LCB- braces -RCB- and -LSB- brackets -RSB- and \\*stars\\* ."],
    ["  spaces   everywhere  ", "spaces everywhere"],
    ["", ""],
  ];
  for (const [text, words] of cases) assert.equal(ptbTokenize(text).join(" "), words, text);
  assert.throws(() => ptbTokenize(null), TypeError);
});

// Penn Treebank words -> the text a writer would type: the test's inverse of the tokenizer, written from the treebank's
// conventions (not from ptb_tokenize.js), to check it on whole sections.
const ATTACH_LEFT = new Set([",", ".", ";", ":", "?", "!", "%", "...", "''", "'", "-RRB-", "-RSB-", "-RCB-",
  "n't", "N'T", "'s", "'S", "'re", "'RE", "'ll", "'LL", "'ve", "'VE", "'m", "'M", "'d", "'D"]);
const ATTACH_RIGHT = new Set(["``", "`", "-LRB-", "-LSB-", "-LCB-", "#"]);
const TEXT = {"``": '"', "''": '"', "`": "'", "-LRB-": "(", "-RRB-": ")", "-LSB-": "[", "-RSB-": "]", "-LCB-": "{", "-RCB-": "}"};
function detokenize(words) {
  let out = "", glue = true;
  words.forEach((w, k) => {
    if (w === "." && k > 0 && words[k - 1].endsWith(".") && words[k - 1] !== "...") return;  // "U.S. ." was typed "U.S."
    const left = ATTACH_LEFT.has(w) || (/^na$/i.test(w) && /^(gon|wan)$/i.test(words[k - 1] ?? ""));
    out += (glue || left ? "" : " ") + (TEXT[w] ?? w).replace(/\\([/*])/g, "$1");
    glue = ATTACH_RIGHT.has(w) || w.endsWith("$");
  });
  return out;
}

test("detokenize (the test's helper)", () => {
  assert.equal(detokenize("`` We ca n't pay $ 1,000 -LRB- or 1\\/2 -RRB- , '' he said in the U.S. .".split(" ")),
               '"We can\'t pay $1,000 (or 1/2)," he said in the U.S.');
});

function agreement(sentences) {
  const same = sentences.filter(w => ptbTokenize(detokenize(w)).join(" ") === w.join(" ")).length;
  return {same, n: sentences.length, percent: 100 * same / sentences.length};
}

test("ptbTokenize on WSJ sections 22 and 23, detokenized: the treebank's own words come back", t => {
  const dev = join(DATA, "ptb", "dev_22.clean"), blind = join(DATA, "ptb", "test_23.words");
  if (!existsSync(dev) || !existsSync(blind)) return t.skip(`no treebank words under ${DATA}`);
  const leaves = line => [...line.matchAll(/\(([^\s()]+) ([^\s()]+)\)/g)].map(m => m[2]);
  const s22 = agreement(readFileSync(dev, "utf8").split("\n").filter(Boolean).map(leaves));
  const s23 = agreement(readFileSync(blind, "utf8").split("\n").filter(Boolean).map(l => l.split(" ")));
  console.log(`ptbTokenize(detokenize(words)) == words: section 22 ${s22.same} of ${s22.n} sentences (${s22.percent.toFixed(1)}%), ` +
              `section 23 ${s23.same} of ${s23.n} (${s23.percent.toFixed(1)}%)`);
  assert.equal(s22.n, 1700); assert.equal(s23.n, 2416);
  assert.ok(s22.percent >= 98.5, `section 22: ${s22.percent.toFixed(1)}%`);
  assert.ok(s23.percent >= 98, `section 23: ${s23.percent.toFixed(1)}%`);
});

test("cky: the Python cky's spans and score on every fixture chart (ties included)", () => {
  assert.ok(FIXTURE.charts.length >= 10);
  for (const c of FIXTURE.charts) {
    const r = cky(Float32Array.from(c.scores), c.n, c.L);
    assert.deepEqual(r.spans, c.spans, c.name);
    assert.equal(r.score, c.score, c.name);
  }
});

test("spansToTree and treeToString: the Python tree, unary chains ('SBAR+S+VP') unfolded", () => {
  for (const c of FIXTURE.charts) {
    const {spans} = cky(Float32Array.from(c.scores), c.n, c.L);
    const tree = spansToTree(c.words, c.tags, spans.map(([i, j, l]) => [i, j, c.labels[l]]));
    assert.equal(treeToString(tree), c.bracketed, c.name);
  }
  assert.ok(FIXTURE.charts.some(c => c.bracketed.includes("(SBAR (S (VP")), "a fixture with a chain of three labels");
  const t = spansToTree(["Go", "home"], ["VB", "RB"], [[0, 2, "S+VP"], [1, 2, "ADVP"]]);  // 19a_spans' example
  assert.equal(treeToString(t), "(TOP (S (VP (VB Go) (ADVP (RB home)))))");
  assert.equal(treeToString(spansToTree(["Hi"], ["UH"], [])), "(TOP (UH Hi))");
});

test("cky refuses a chart of the wrong size", () => {
  assert.throws(() => cky(new Float32Array(10), 2, 2), RangeError);
  assert.throws(() => cky(new Float32Array(0), 0, 2), RangeError);
});

test("pieceIds: chart_batch's piece ids for the same words (BOS, pieces, EOS, padding, at most 20 a word)", () => {
  const sp = SentencePiece.fromBytes(readFileSync(join(ROOT, "pretrained", "ptb-chart", "tokenizer.pieces.model_proto.bin")));
  const ids = {pad_id: 0, bos_id: 1, eos_id: 2, max_pieces: 20};
  for (const {words, pieces} of FIXTURE.inputs) {
    const x = pieceIds(sp, words, ids);
    assert.deepEqual(x.dims, [pieces.length, pieces[0].length], words.join(" "));
    assert.deepEqual(Array.from(x.data, Number), pieces.flat(), words.join(" "));
  }
  assert.ok(FIXTURE.inputs.some(i => i.pieces[0].length === 20), "a fixture word cut at 20 pieces");
});

test("argmaxRows: the first of equal maxima, as torch's argmax", () => {
  assert.deepEqual(argmaxRows(Float32Array.from([1, 3, 3, 0, -1, -2, -1, -5]), 2, 4), [1, 0]);
});
