/* Greedy decoding and beam search for the in-page translators.
 *
 * They follow the book's page 10 (`simple_greedy_decode`, `simple_beam_search`) line by line, with the output limit
 * and the stopping rule of the package's `greedy_decode` and `beam_search` (what at-translate runs): at most
 * a * (source length, EOS included) + b tokens, never past the positional table; a sentence's search ends when K
 * hypotheses have finished. Scores are summed in float32 (Math.fround), as PyTorch sums them, so that ties and
 * near-ties break the same way.
 *
 * A decoder is any object with
 *   start(rows)      begin `rows` rows, each about to read BOS
 *   step(tokens)     -> Promise<Float32Array> (rows x V): log P(next token) after each row's newest token
 *   reorder(index)   row i continues row index[i] (the number of rows may change)
 *   vocabSize        V
 * The translator (translator.js) is one, over onnxruntime-web; the tests also use small made-up ones.
 */

/** GNMT's length penalty lp(Y) = ((5 + |Y|) / 6) ** alpha. */
export function lengthPenalty(length, alpha = 0.6) {
  return ((5 + length) / 6) ** alpha;
}

/** Output-length limit: a * srcLen + b tokens, at most maxLen - 1 (the positional table). srcLen counts EOS. */
export function lengthLimit(srcLen, {maxLenA = 1.0, maxLenB = 50, maxLen = 256} = {}) {
  return Math.min(Math.floor(srcLen * maxLenA + maxLenB), maxLen - 1);
}

/** The most likely token at each step until EOS or `limit` tokens: token ids without BOS, EOS kept. */
export async function greedyDecode(decoder, {bos, eos, limit}) {
  decoder.start(1);
  const ys = [bos];
  for (let t = 0; t < limit; t++) {
    const logp = await decoder.step([ys[ys.length - 1]]);  // (1, V)
    ys.push(argmax(logp, 0, decoder.vocabSize));
    if (ys[ys.length - 1] === eos) break;
  }
  return ys.slice(1);
}

/** Index of the largest of v[from .. from+n), the first one on a tie (as torch.argmax). */
export function argmax(v, from, n) {
  let best = 0, bv = -Infinity;
  for (let i = 0; i < n; i++) if (v[from + i] > bv) { bv = v[from + i]; best = i; }
  return best;
}

/** The `n` best of logpSum[b] + logp[b, w] over every beam b and token w, best first: [{score, beam, tok}]. */
export function topExtensions(logpSum, logp, V, n) {
  const best = [];  // kept sorted, best first; at most n long
  for (let b = 0; b < logpSum.length; b++) {
    const base = logpSum[b];
    if (base === -Infinity) continue;
    for (let w = 0; w < V; w++) {
      const s = Math.fround(base + logp[b * V + w]);  // float32, as scores.view(-1, 1) + logp
      if (best.length === n && !(s > best[n - 1].score)) continue;
      let i = best.length === n ? n - 1 : best.length;
      while (i > 0 && best[i - 1].score < s) i--;  // ties keep the earlier (beam, token) first
      best.splice(i, 0, {score: s, beam: b, tok: w});
      if (best.length > n) best.pop();
    }
  }
  return best;
}

/**
 * Beam search for one sentence: the finished hypotheses {score, logprob, tokens}, best first, where score is
 * log P(Y|X) / lp(Y) and tokens have no BOS (EOS last unless the length limit cut the hypothesis).
 * `trace`, if given, receives each step's candidates and which of them live on (for drawing the search).
 */
export async function beamSearch(decoder, {bos, eos, limit, beamSize = 4, alpha = 0.6, trace = null}) {
  const K = beamSize, V = decoder.vocabSize;
  decoder.start(1);
  let ys = [[bos]], logpSum = [0];  // the live beams and their log P
  const finished = [];
  for (let t = 0; t < limit; t++) {
    const logp = await decoder.step(ys.map(y => y[y.length - 1]));  // (k, V)
    const top = topExtensions(logpSum, logp, V, 2 * K);  // the 2K best one-token extensions
    for (let j = 0; j < Math.min(K, top.length); j++) {  // an EOS among the K best ends a hypothesis
      const c = top[j];
      if (c.tok === eos && Number.isFinite(c.score))
        finished.push({score: c.score / lengthPenalty(t + 1, alpha), logprob: c.score, tokens: [...ys[c.beam].slice(1), eos]});
    }
    const live = top.filter(c => c.tok !== eos).slice(0, K);  // the K best that go on
    if (trace) trace.push({candidates: top.map(c => ({...c})), live: live.map(c => top.indexOf(c))});
    decoder.reorder(live.map(c => c.beam));
    ys = live.map(c => [...ys[c.beam], c.tok]);
    logpSum = live.map(c => c.score);
    if (t + 1 === limit) {  // out of length: the live beams join the finished ones
      if (logpSum.length && logpSum[0] > -Infinity)
        ys.forEach((y, k) => finished.push({score: logpSum[k] / lengthPenalty(t + 1, alpha), logprob: logpSum[k], tokens: y.slice(1)}));
    } else if (finished.length >= K) break;
  }
  return finished.map((h, i) => ({...h, i})).sort((a, b) => b.score - a.score || a.i - b.i).map(({i, ...h}) => h);
}
