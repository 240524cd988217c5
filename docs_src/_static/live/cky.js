/* CKY over a chart parser's span scores, and the tree it finds: annotated_transformer.parsing.spans (nbs/19a_spans.ipynb) in JS.
 *
 *   import {cky, spansToTree, treeToString} from "./cky.js";
 *   const {spans, score} = cky(scores, n, L);   // scores: Float32Array (n+1, n+1, L), label 0 the empty label (score 0)
 *   const tree = spansToTree(words, tags, spans.map(([i, j, l]) => [i, j, labels[l]]));
 *   treeToString(tree)                           // "(TOP (S (NP (PRP She)) ...))", as str(Tree) writes it
 *
 * `cky` is Python's `cky` for one sentence (B = 1, N = n), line for line: the loop over spans of one width that Python
 * runs as one tensor operation is written out here, and the sums are rounded to float32 (Math.fround) as the Python
 * chart, a float32 tensor, rounds them, so ties and near-ties fall the same way. A tie goes to the first label and the
 * first split point, as torch's max does.
 */

/** The best label of each span (i, j) and its score, the empty label allowed (`scores.max(-1)`), or not (`scores[..., 1:].max(-1)`). */
function bestLabels(scores, n, L, from) {
  const best = new Float32Array((n + 1) * (n + 1)), label = new Int32Array((n + 1) * (n + 1));
  for (let s = 0; s < (n + 1) * (n + 1); s++) {
    let b = scores[s * L + from], arg = from;
    for (let l = from + 1; l < L; l++) if (scores[s * L + l] > b) { b = scores[s * L + l]; arg = l; }
    best[s] = b; label[s] = arg;
  }
  return {best, label};
}

/**
 * The highest-scoring tree: sum of its spans' label scores, every span (i, j) of a binary bracketing labelled (∅ allowed
 * except at the root). Returns {spans: [[i, j, label id], ...] sorted by (i, -j), score}.
 */
export function cky(scores, n, L) {
  if (!(n >= 1)) throw new RangeError(`cky: a sentence of ${n} words; expected at least one`);
  if (scores.length !== (n + 1) * (n + 1) * L) throw new RangeError(`cky: ${scores.length} scores; expected (n+1)·(n+1)·L = ${(n + 1) * (n + 1) * L}`);
  const at = (i, j) => i * (n + 1) + j;
  const {best, label} = bestLabels(scores, n, L, 0);                        // the best label of every span
  const {best: rootBest, label: rootLabel} = bestLabels(scores, n, L, 1);   // the root span must be a constituent
  const chart = new Float32Array((n + 1) * (n + 1)), split = new Int32Array((n + 1) * (n + 1));
  for (let w = 1; w <= n; w++) {
    for (let i = 0; i <= n - w; i++) {                                       // every span of width w
      const j = i + w;
      let here = best[at(i, j)];
      if (w === n && i === 0) { here = rootBest[at(0, w)]; label[at(0, w)] = rootLabel[at(0, w)]; }  // the whole sentence
      if (w > 1) {
        let m = -Infinity, arg = 0;
        for (let k = i + 1; k < j; k++) {                                    // split points
          const both = Math.fround(chart[at(i, k)] + chart[at(k, j)]);
          if (both > m) { m = both; arg = k; }
        }
        here = Math.fround(here + m); split[at(i, j)] = arg;
      }
      chart[at(i, j)] = here;
    }
  }
  const spans = [], stack = [[0, n]];                                        // the backtrace
  while (stack.length) {
    const [i, j] = stack.pop();
    if (label[at(i, j)]) spans.push([i, j, label[at(i, j)]]);
    if (j - i > 1) { const k = split[at(i, j)]; stack.push([k, j], [i, k]); }
  }
  spans.sort((a, b) => a[0] - b[0] || b[1] - a[1]);
  return {spans, score: chart[at(0, n)]};
}

/** The tree of non-crossing labelled spans [i, j, "label"], under TOP; words outside any one-word span become preterminals (tag word). */
export function spansToTree(words, tags, spans) {
  const label = new Map(spans.map(([i, j, l]) => [`${i},${j}`, l]));
  const ends = new Map();
  for (const key of label.keys()) { const [i, j] = key.split(",").map(Number); if (!ends.has(i)) ends.set(i, []); ends.get(i).push(j); }
  const kids = (i, j) => {
    const out = [];
    let k = i;
    while (k < j) {
      let e = null;
      for (const x of ends.get(k) ?? []) if (x <= j && !(k === i && x === j) && (e === null || x > e)) e = x;
      if (e === null) { out.push({label: tags[k], children: [words[k]]}); k += 1; }
      else { out.push(node(k, e)); k = e; }
    }
    return out;
  };
  const node = (i, j) => {
    const chain = label.get(`${i},${j}`).split("+");
    let t = {label: chain[chain.length - 1], children: kids(i, j)};
    for (const l of chain.slice(0, -1).reverse()) t = {label: l, children: [t]};
    return t;
  };
  const n = words.length;
  return {label: "TOP", children: label.has(`0,${n}`) ? [node(0, n)] : kids(0, n)};
}

/** A tree as a bracketed string, as the package's `str(Tree)` writes it. */
export function treeToString(t) {
  return `(${t.label} ` + t.children.map(c => typeof c === "string" ? c : treeToString(c)).join(" ") + ")";
}
