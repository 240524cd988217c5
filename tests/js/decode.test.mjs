// Greedy decoding and beam search (docs_src/_static/live/decode.js) on small made-up decoders whose answers are
// known by hand or by brute force.
import test from 'node:test';
import assert from 'node:assert/strict';
import {argmax, beamSearch, greedyDecode, lengthLimit, lengthPenalty, topExtensions} from '../../docs_src/_static/live/decode.js';

const BOS = 1, EOS = 2;

// A decoder whose next-token distribution depends only on the tokens so far, through `dist(prefix) -> probs`.
function tableDecoder(V, dist) {
  return {
    vocabSize: V,
    start(rows) { this.prefixes = Array.from({length: rows}, () => []); },
    async step(tokens) {
      this.prefixes = this.prefixes.map((p, i) => [...p, tokens[i]]);
      const out = new Float32Array(tokens.length * V);
      this.prefixes.forEach((p, i) => dist(p).forEach((pr, w) => { out[i * V + w] = Math.log(pr); }));
      return out;
    },
    reorder(index) { this.prefixes = index.map(r => this.prefixes[r]); },
  };
}

test('length penalty and limit are the package\'s', () => {
  assert.equal(lengthPenalty(1, 0.6), 1);
  assert.ok(Math.abs(lengthPenalty(7, 0.6) - 2 ** 0.6) < 1e-12);
  assert.equal(lengthPenalty(9, 0), 1);
  assert.equal(lengthLimit(10), 60);
  assert.equal(lengthLimit(300, {maxLen: 256}), 255);
  assert.equal(lengthLimit(7, {maxLenA: 1.5, maxLenB: 0}), 10);
});

test('argmax takes the first of equal maxima, as torch.argmax', () => {
  assert.equal(argmax(Float32Array.of(0, 3, 1, 3), 0, 4), 1);
  assert.equal(argmax(Float32Array.of(9, 0, 3, 1, 3), 1, 4), 1);
});

test('topExtensions ranks every beam\'s every token together, as a brute-force sort does', () => {
  let seed = 7; const rnd = () => (seed = (seed * 16807) % 2147483647) / 2147483647;
  const V = 11, sums = [-0.3, -1.7, -2.2], logp = Float32Array.from({length: 3 * V}, () => Math.log(rnd()));
  const all = [];
  sums.forEach((s, b) => { for (let w = 0; w < V; w++) all.push({score: Math.fround(s + logp[b * V + w]), beam: b, tok: w}); });
  all.sort((x, y) => y.score - x.score || x.beam - y.beam || x.tok - y.tok);
  assert.deepEqual(topExtensions(sums, logp, V, 8), all.slice(0, 8));
  assert.deepEqual(topExtensions([0, -Infinity], logp.subarray(0, 2 * V), V, 3).map(c => c.beam), [0, 0, 0]);
});

// After BOS, token 3 is likelier than 4 (0.5 against 0.4), but every continuation of 3 is flat (0.25 each) while
// 4 is followed by EOS at 0.9: greedy takes 3 and ends worse; a beam of 2 finds 4 EOS.
const trap = prefix => {
  const last = prefix[prefix.length - 1];
  if (last === BOS) return [0, 0, 0.1, 0.5, 0.4];
  if (last === 3) return [0.25, 0, 0.25, 0.25, 0.25];
  if (last === 4) return [0.05, 0, 0.9, 0.025, 0.025];
  return [0.1, 0.1, 0.6, 0.1, 0.1];
};

test('greedy decoding takes the most likely token each step and stops at EOS', async () => {
  const toks = await greedyDecode(tableDecoder(5, trap), {bos: BOS, eos: EOS, limit: 10});
  assert.deepEqual(toks, [3, 0, EOS]);  // 3, then the first of the equal 0.25s (token 0), then EOS (0.6)
});

test('beam search finds what greedy misses, and scores it as log P / lp', async () => {
  const hyps = await beamSearch(tableDecoder(5, trap), {bos: BOS, eos: EOS, limit: 10, beamSize: 2, alpha: 0.6});
  assert.deepEqual(hyps[0].tokens, [4, EOS]);
  const logp = Math.fround(Math.fround(Math.log(0.4)) + Math.fround(Math.log(0.9)));
  assert.ok(Math.abs(hyps[0].logprob - logp) < 1e-6);
  assert.ok(Math.abs(hyps[0].score - logp / lengthPenalty(2, 0.6)) < 1e-6);
  for (let i = 1; i < hyps.length; i++) assert.ok(hyps[i - 1].score >= hyps[i].score, 'best first');
});

test('beam search is exhaustive when the beam holds every prefix', async () => {
  // V = 4 (0 and 1 never chosen: probability ~0), tokens 2 (EOS) and 3; limit 3. Every sequence is scored by hand.
  const dist = p => { const n = p.filter(t => t === 3).length; const e = [0.3, 0.6, 0.45][n]; return [1e-9, 1e-9, e, 1 - e - 2e-9]; };
  const hyps = await beamSearch(tableDecoder(4, dist), {bos: BOS, eos: EOS, limit: 3, beamSize: 8, alpha: 0.6});
  const f = Math.fround, L = x => f(Math.log(f(x)));
  const byHand = [
    [[EOS], f(L(0.3))],
    [[3, EOS], f(L(0.7) + L(0.6))],
    [[3, 3, EOS], f(f(L(0.7) + L(0.4)) + L(0.45))],
    [[3, 3, 3], f(f(L(0.7) + L(0.4)) + L(0.55))],
  ].map(([tokens, lp]) => ({tokens, score: lp / lengthPenalty(tokens.length, 0.6)})).sort((a, b) => b.score - a.score);
  assert.deepEqual(hyps.slice(0, 4).map(h => h.tokens), byHand.map(h => h.tokens));
});

test('the length limit cuts the live beams and returns them unfinished', async () => {
  const never = () => [0.1, 0, 0, 0.5, 0.4];  // EOS has probability 0
  const hyps = await beamSearch(tableDecoder(5, never), {bos: BOS, eos: EOS, limit: 3, beamSize: 2});
  assert.equal(hyps.length, 2);
  for (const h of hyps) { assert.equal(h.tokens.length, 3); assert.ok(!h.tokens.includes(EOS)); }
  assert.deepEqual(hyps[0].tokens, [3, 3, 3]);
  assert.deepEqual(await greedyDecode(tableDecoder(5, never), {bos: BOS, eos: EOS, limit: 3}), [3, 3, 3]);
});
