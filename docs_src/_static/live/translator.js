/* A shipped translator in the page: two ONNX graphs (made from pretrained/ at docs build time by the package's
 * `onnx_export`), its SentencePiece model, and the decoding of decode.js.
 *
 * Both graphs read the tied embedding and the positional table from one file (meta.json's external_data).
 *   encoder.onnx  src (1, S) -> memory, cross_k and cross_v (L, 1, H, S, Dh), enc_attn (L, 1, H, S, S)
 *   decoder.onnx  tokens (N, 1), step (1), self_k and self_v (L, N, H, t, Dh), cross_k, cross_v
 *                 -> logprobs (N, V), new_self_k, new_self_v (L, N, H, t+1, Dh), self_attn (L, N, H, 1, t+1),
 *                    cross_attn (L, N, H, 1, S)
 *
 * `ort` (onnxruntime-web) and `load(file) -> Uint8Array` are passed in, so the same module runs in the browser
 * (fetch and the Cache API, see loader.js) and under node (files on disk), where the tests run it.
 */
import {beamSearch, greedyDecode, lengthLimit} from './decode.js';
import {SentencePiece} from './spm.js';

/** Keep rows `index` of a (L, N, ...) float tensor's data along its second axis: row i becomes old row index[i]. */
export function gatherRows(data, dims, index) {
  const [L, N] = dims, inner = dims.slice(2).reduce((a, b) => a * b, 1);
  const out = new Float32Array(L * index.length * inner);
  for (let l = 0; l < L; l++)
    index.forEach((r, i) => out.set(data.subarray((l * N + r) * inner, (l * N + r + 1) * inner), (l * index.length + i) * inner));
  return out;
}

/** A decoder for decode.js over decoder.onnx, for one encoded sentence; keeps each step's attention weights. */
class OnnxDecoder {
  constructor(tr, enc) {
    this.tr = tr; this.enc = enc; this.vocabSize = tr.meta.vocab_size;
  }
  start(rows) {
    const {n_layers: L, n_heads: H, head_dim: Dh} = this.tr.meta;
    this.N = rows; this.t = 0; this.dims = [L, rows, H, 0, Dh];
    this.k = new Float32Array(0); this.v = new Float32Array(0);
    this.attn = [];  // per step: {self, cross} data and dims, row-aligned with the cache
  }
  async step(tokens) {
    const {ort} = this.tr, N = tokens.length;
    if (N !== this.N) throw new Error(`decoder: ${N} tokens for ${this.N} rows`);
    const out = await this.tr.decoder.run({
      tokens: new ort.Tensor('int64', BigInt64Array.from(tokens, BigInt), [N, 1]),
      step: new ort.Tensor('int64', BigInt64Array.of(BigInt(this.t)), [1]),
      self_k: new ort.Tensor('float32', this.k, this.dims), self_v: new ort.Tensor('float32', this.v, this.dims),
      cross_k: this.enc.crossK, cross_v: this.enc.crossV,
    });
    this.k = out.new_self_k.data; this.v = out.new_self_v.data; this.dims = [...out.new_self_k.dims];
    if (this.keepAttention) this.attn.push({self: out.self_attn, cross: out.cross_attn});
    this.t += 1;
    return out.logprobs.data;  // (N, V)
  }
  reorder(index) {
    this.k = gatherRows(this.k, this.dims, index); this.v = gatherRows(this.v, this.dims, index);
    this.dims = [this.dims[0], index.length, ...this.dims.slice(2)]; this.N = index.length;
  }
}

export class Translator {
  /** Load a translator: meta.json, the tokenizer and both graphs, each through `load(name) -> Uint8Array`. */
  static async load(ort, load, {sessionOptions = {}} = {}) {
    const meta = JSON.parse(new TextDecoder().decode(await load('meta.json')));
    const sp = SentencePiece.fromBytes(await load('spm.model'));
    // files both graphs read (the tied embedding and the positional table, stored once): meta.external_data
    const shared = await Promise.all(Object.keys(meta.external_data || {}).map(async path => ({path, data: await load(path)})));
    const opts = {executionProviders: ['wasm'], graphOptimizationLevel: 'all', ...sessionOptions};
    const session = async file => ort.InferenceSession.create(await load(file), {...opts,
      externalData: shared.filter(x => meta.external_data[x.path].includes(file))});
    const encoder = await session('encoder.onnx'), decoder = await session('decoder.onnx');
    return new Translator(ort, meta, sp, encoder, decoder);
  }
  constructor(ort, meta, sp, encoder, decoder) {
    Object.assign(this, {ort, meta, sp, encoder, decoder});
    for (const k of ['n_layers', 'n_heads', 'head_dim', 'vocab_size', 'bos_id', 'eos_id', 'pad_id', 'max_len'])
      if (!Number.isInteger(meta[k])) throw new Error(`meta.json: ${k} is missing or not an integer`);
  }

  /** Source ids as at-translate makes them: the pieces' ids, then EOS; too long -> an error naming the length. */
  sourceIds(text) {
    const ids = this.sp.encode(text);
    if (ids.length + 1 > this.meta.max_len)
      throw new RangeError(`${ids.length} subword tokens: this model reads at most ${this.meta.max_len - 1}; shorten the sentence`);
    return [...ids, this.meta.eos_id];
  }

  async encode(src) {
    const out = await this.encoder.run({src: new this.ort.Tensor('int64', BigInt64Array.from(src, BigInt), [1, src.length])});
    return {src, crossK: out.cross_k, crossV: out.cross_v, encAttn: out.enc_attn};
  }

  /**
   * Translate one sentence: {text, tokens, srcIds} (tokens without EOS). beamSize 1 is greedy decoding.
   * Blank input gives '' as at-translate does for an empty line.
   */
  async translate(text, {beamSize = this.meta.beam_size ?? 4, alpha = this.meta.alpha ?? 0.6, withAttention = false} = {}) {
    if (typeof text !== 'string') throw new TypeError('translate: expected a string');
    if (!text.trim()) return {text: '', tokens: [], srcIds: []};
    const src = this.sourceIds(text), enc = await this.encode(src);
    const {bos_id: bos, eos_id: eos, max_len: maxLen} = this.meta;
    const limit = lengthLimit(src.length, {maxLenA: 1.0, maxLenB: 50, maxLen});
    const dec = new OnnxDecoder(this, enc);
    let tokens;
    if (beamSize === 1) tokens = await greedyDecode(dec, {bos, eos, limit});
    else tokens = (await beamSearch(dec, {bos, eos, limit, beamSize, alpha}))[0].tokens;
    const out = tokens.filter(t => t !== eos);
    const res = {text: this.sp.decode(out).replace(/[\r\n]/g, ' '), tokens: out, srcIds: src};
    if (withAttention) res.attention = await this.attention(enc, out);
    return res;
  }

  /**
   * Every head of every layer for one translation, in the attention explorer's layout ([layer][head][query][key],
   * plain weights, scale 1): the encoder's self-attention, and the decoder's self- and cross-attention read again
   * by teacher forcing the chosen output (queries: BOS and the output tokens; the last query predicts EOS).
   */
  async attention(enc, tokens) {
    const {n_layers: L, n_heads: H, bos_id: bos} = this.meta, S = enc.src.length, T = tokens.length + 1;
    const dec = new OnnxDecoder(this, enc);
    dec.keepAttention = true; dec.start(1);
    for (const tok of [bos, ...tokens]) await dec.step([tok]);
    const grid = (f, Q, Kn) => Array.from({length: L}, (_, l) => Array.from({length: H}, (_, h) =>
      Array.from({length: Q}, (_, q) => Array.from({length: Kn}, (_, k) => f(l, h, q, k)))));
    const e = enc.encAttn.data;
    return {
      encoder: grid((l, h, q, k) => e[((l * H + h) * S + q) * S + k], S, S),
      self: grid((l, h, q, k) => k > q ? 0 : dec.attn[q].self.data[(l * H + h) * (q + 1) + k], T, T),
      cross: grid((l, h, q, k) => dec.attn[q].cross.data[(l * H + h) * S + k], T, S),
    };
  }

  /** A record in the attention explorer's layout, for one sentence. */
  async record(text, opts = {}) {
    const r = await this.translate(text, {...opts, withAttention: true});
    const piece = id => this.sp.idToPiece(id);
    return {
      id: 'yours', title: 'your sentence', why: 'Translated in this page by the shipped model (beam ' + (opts.beamSize ?? 4) + ').',
      source: text, translation: r.text, reference: '—',
      src_tokens: r.srcIds.map(i => i === this.meta.eos_id ? 'EOS' : piece(i)),
      tgt_tokens: ['BOS', ...r.tokens.map(piece)], scale: 1, attention: r.attention,
    };
  }
}
