/* SentencePiece tokenization in plain JS, for the site's in-page models: an ES module with no dependencies that runs in the
 * browser and in node 20 (it needs only TextEncoder, TextDecoder and DataView; loadSentencePiece(url) also fetch).
 *
 * It reads the model file the shipped models carry (`spm.model`, a serialized sentencepiece ModelProto) and gives the ids
 * of Python's `spm.SentencePieceProcessor(model_file=...).encode(text)` and the text of `.decode(ids)`. It follows
 * google/sentencepiece (src/normalizer.cc, src/bpe_model.cc, src/model_interface.cc, src/sentencepiece_processor.cc)
 * step by step; the comments name the C++ function each part mirrors. tests/js/spm.test.mjs and
 * tests/test_live_tokenizer.py check it against Python's sentencepiece.
 *
 *   import {SentencePiece} from "./spm.js";
 *   const sp = SentencePiece.fromBytes(bytes);      // Uint8Array or ArrayBuffer of spm.model
 *   sp.encode("Ein Hund läuft.")                    // ids, as sp.encode(text) in Python (no BOS/EOS)
 *   sp.encode(text, {addEos: true})                 // ids + EOS, as sp.encode(text, add_eos=True): a translator's source
 *                                                   // (as inference.encode_sources makes it, before any cut to max_len)
 *   sp.encodeAsPieces(text); sp.decode(ids); sp.pieceToId(piece); sp.idToPiece(id); sp.vocabSize
 *   sp.unkId, sp.bosId, sp.eosId, sp.padId          // -1 where the model has none, as in Python
 *
 * Scope: BPE models (model_type BPE, as `SubwordTokenizer.train` makes by default), with or without byte fallback, any
 * normalizer (identity, nmt_nfkc, nfkc_cf, custom rules: applied through the model's precompiled charsmap, exactly as the
 * C++ does), user-defined symbols, unused pieces, treat_whitespace_as_suffix, a denormalizer. Unigram, word and char models
 * are refused with an error. No sampling (BPE-dropout) and no n-best.
 * It reads the chart parser's subword model (pretrained/ptb-chart/tokenizer.pieces.model_proto.bin) the same way.
 * Input text is a JS string; it is encoded as UTF-8, where a lone surrogate becomes U+FFFD (Python's sentencepiece refuses
 * such a string with an error, as it cannot be encoded as UTF-8).
 */

const SPACE = "\u2581";  // ▁, what the normalizer writes for a space (kSpaceSymbol)
const SPACE_BYTES = [0xe2, 0x96, 0x81];
const SPACE_BYTES_U8 = new Uint8Array(SPACE_BYTES);
const REPLACEMENT_BYTES = new Uint8Array([0xef, 0xbf, 0xbd]);  // U+FFFD in UTF-8
const TYPE = {NORMAL: 1, UNKNOWN: 2, CONTROL: 3, USER_DEFINED: 4, UNUSED: 5, BYTE: 6};
const MODEL_TYPE = {1: "unigram", 2: "bpe", 3: "word", 4: "char"};
const MAX_TRIE_RESULTS = 32;  // Normalizer::kMaxTrieResultsSize
const utf8 = new TextEncoder();
const fromUtf8 = new TextDecoder("utf-8");

// ---------------------------------------------------------------------------------------------------------------------
// The ModelProto, read from the protobuf wire format (src/sentencepiece_model.proto): varints (wire type 0), 64-bit (1),
// length-delimited (2) and 32-bit (5) fields; unknown fields are skipped. Absent fields take the .proto's defaults.

class ProtoReader {
  constructor(bytes, start = 0, end = bytes.length) {
    this.bytes = bytes; this.pos = start; this.end = end;
    this.view = new DataView(bytes.buffer, bytes.byteOffset, bytes.byteLength);
  }
  done() { return this.pos >= this.end; }
  varint() {  // -> [low 32 bits, high 32 bits], both unsigned
    let lo = 0, hi = 0, shift = 0, b;
    do {
      if (this.pos >= this.end) throw new Error("sentencepiece model: truncated varint");
      b = this.bytes[this.pos++];
      if (shift < 28) lo |= (b & 0x7f) << shift;
      else if (shift === 28) { lo |= (b & 0x0f) << 28; hi |= (b & 0x7f) >> 4; }
      else if (shift < 64) hi |= (b & 0x7f) << (shift - 32);
      shift += 7;
    } while (b & 0x80);
    return [lo >>> 0, hi >>> 0];
  }
  int32() { return this.varint()[0] | 0; }  // int32 fields: a negative value is sent as ten bytes, its low 32 bits are it
  bool() { const [lo, hi] = this.varint(); return lo !== 0 || hi !== 0; }
  float() { this.need(4); const x = this.view.getFloat32(this.pos, true); this.pos += 4; return x; }
  need(n) { if (this.pos + n > this.end) throw new Error("sentencepiece model: truncated field"); }
  bytesField() { const n = this.varint()[0]; this.need(n); const b = this.bytes.subarray(this.pos, this.pos + n); this.pos += n; return b; }
  string() { return fromUtf8.decode(this.bytesField()); }
  message() { const n = this.varint()[0]; this.need(n); const r = new ProtoReader(this.bytes, this.pos, this.pos + n); this.pos += n; return r; }
  skip(wire) {
    if (wire === 0) this.varint();
    else if (wire === 1) { this.need(8); this.pos += 8; }
    else if (wire === 2) this.bytesField();
    else if (wire === 5) { this.need(4); this.pos += 4; }
    else throw new Error(`sentencepiece model: unsupported wire type ${wire}`);
  }
  // Calls read(field, wire) for each field; read returns false for a field it did not consume, which is then skipped.
  fields(read) {
    while (!this.done()) {
      const key = this.varint()[0], field = key >>> 3, wire = key & 7;
      if (!read(field, wire)) this.skip(wire);
    }
  }
}

function readPiece(r) {  // ModelProto.SentencePiece
  const p = {piece: "", score: 0, type: TYPE.NORMAL};
  r.fields((f, w) => {
    if (f === 1 && w === 2) p.piece = r.string();
    else if (f === 2 && w === 5) p.score = r.float();
    else if (f === 3 && w === 0) p.type = r.int32();
    else return false;
    return true;
  });
  return p;
}

function trainerSpecDefaults() {
  return {modelType: 1, treatWhitespaceAsSuffix: false, byteFallback: false, unkId: 0, bosId: 1, eosId: 2, padId: -1,
          unkPiece: "", bosPiece: "", eosPiece: "", padPiece: "", unkSurface: null};
}
function readTrainerSpec(r, t) {
  const ints = {3: "modelType", 40: "unkId", 41: "bosId", 42: "eosId", 43: "padId"};
  const bools = {24: "treatWhitespaceAsSuffix", 35: "byteFallback"};
  const strings = {44: "unkSurface", 45: "unkPiece", 46: "bosPiece", 47: "eosPiece", 48: "padPiece"};
  r.fields((f, w) => {
    if (w === 0 && f in ints) t[ints[f]] = r.int32();
    else if (w === 0 && f in bools) t[bools[f]] = r.bool();
    else if (w === 2 && f in strings) t[strings[f]] = r.string();
    else return false;
    return true;
  });
  return t;
}

function normalizerSpecDefaults() {
  return {name: "", precompiledCharsmap: new Uint8Array(0), addDummyPrefix: true, removeExtraWhitespaces: true,
          escapeWhitespaces: true};
}
function readNormalizerSpec(r, n) {
  const bools = {3: "addDummyPrefix", 4: "removeExtraWhitespaces", 5: "escapeWhitespaces"};
  r.fields((f, w) => {
    if (f === 1 && w === 2) n.name = r.string();
    else if (f === 2 && w === 2) n.precompiledCharsmap = r.bytesField();
    else if (w === 0 && f in bools) n[bools[f]] = r.bool();
    else return false;
    return true;
  });
  return n;
}

/** The fields of a serialized ModelProto that tokenization needs. */
export function parseModelProto(bytes) {
  const m = {pieces: [], trainerSpec: trainerSpecDefaults(), normalizerSpec: normalizerSpecDefaults(), denormalizerSpec: null};
  const r = new ProtoReader(bytes);
  r.fields((f, w) => {
    if (w !== 2) return false;
    if (f === 1) m.pieces.push(readPiece(r.message()));
    else if (f === 2) readTrainerSpec(r.message(), m.trainerSpec);  // a message sent twice is merged, as protobuf does
    else if (f === 3) readNormalizerSpec(r.message(), m.normalizerSpec);
    else if (f === 5) m.denormalizerSpec = readNormalizerSpec(r.message(), m.denormalizerSpec || normalizerSpecDefaults());
    else return false;
    return true;
  });
  return m;
}

// ---------------------------------------------------------------------------------------------------------------------
// The precompiled charsmap: <trie size, uint32 LE><darts-clone double-array trie><replacement strings, each ending in \0>
// (Normalizer::DecodePrecompiledCharsMap). The trie maps a UTF-8 byte sequence to the offset of its replacement.

class DoubleArray {  // third_party/darts_clone/darts.h, DoubleArrayImpl::commonPrefixSearch
  constructor(blob) {  // blob: the trie's bytes, little-endian uint32 units
    const view = new DataView(blob.buffer, blob.byteOffset, blob.byteLength);
    this.units = new Uint32Array(blob.byteLength >>> 2);
    for (let i = 0; i < this.units.length; i++) this.units[i] = view.getUint32(4 * i, true);
  }
  static offset(u) { return ((u >>> 10) << ((u & (1 << 9)) >>> 6)) >>> 0; }
  // The longest key that is a prefix of bytes[pos..end), among the first `max` matches (shortest first) as the C++ keeps:
  // -> [its length, its value], or [0, 0] when none.
  longestPrefix(bytes, pos, end, max = MAX_TRIE_RESULTS) {
    const units = this.units;
    let node = DoubleArray.offset(units[0]), n = 0, length = 0, value = 0;
    for (let i = pos; i < end; i++) {
      const b = bytes[i];
      node = (node ^ b) >>> 0;
      if (node >= units.length) break;
      const u = units[node];
      if (((u & 0x800000ff) >>> 0) !== b) break;  // label(): a leaf unit has bit 31 set and never matches
      node = (node ^ DoubleArray.offset(u)) >>> 0;
      if ((u >>> 8) & 1) {  // has_leaf(): the unit at `node` holds the value
        if (n < max && node < units.length) { length = i - pos + 1; value = units[node] & 0x7fffffff; }
        n++;
      }
    }
    return [length, value];
  }
}

// Longest match among a set of keys (the user-defined symbols): normalizer::PrefixMatcher. Keys are sequences of numbers:
// UTF-8 bytes for the normalizer, UTF-16 code units for the BPE split (both give the same match on valid text).
class PrefixMatcher {
  constructor(keys) { this.root = new Map(); this.empty = keys.length === 0; for (const k of keys) this.add(k); }
  add(key) {
    let node = this.root;
    for (const c of key) { if (!node.has(c)) node.set(c, new Map()); node = node.get(c); }
    node.set(-1, true);  // end of a key
  }
  match(at, pos, end) {  // at(i) -> the i-th element; -> length of the longest key at pos, 0 when none
    let node = this.root, best = 0;
    for (let i = pos; i < end && node; i++) { node = node.get(at(i)); if (node && node.has(-1)) best = i - pos + 1; }
    return best;
  }
}

// string_util::DecodeUTF8 + IsValidDecodeUTF8 on bytes[pos..end): -> [code point or -1 when invalid, bytes consumed].
// An invalid sequence consumes one byte. (A literal U+FFFD is valid.)
function decodeUtf8(bytes, pos, end) {
  const len = end - pos, b0 = bytes[pos];
  const trail = i => (bytes[pos + i] & 0xc0) === 0x80;
  const valid = c => c < 0xd800 || (c >= 0xe000 && c <= 0x10ffff);
  if (b0 < 0x80) return [b0, 1];
  if (len >= 2 && (b0 & 0xe0) === 0xc0) {
    const c = ((b0 & 0x1f) << 6) | (bytes[pos + 1] & 0x3f);
    if (trail(1) && c >= 0x80 && valid(c)) return [c, 2];
  } else if (len >= 3 && (b0 & 0xf0) === 0xe0) {
    const c = ((b0 & 0x0f) << 12) | ((bytes[pos + 1] & 0x3f) << 6) | (bytes[pos + 2] & 0x3f);
    if (trail(1) && trail(2) && c >= 0x800 && valid(c)) return [c, 3];
  } else if (len >= 4 && (b0 & 0xf8) === 0xf0) {
    const c = ((b0 & 0x07) << 18) | ((bytes[pos + 1] & 0x3f) << 12) | ((bytes[pos + 2] & 0x3f) << 6) | (bytes[pos + 3] & 0x3f);
    if (trail(1) && trail(2) && trail(3) && c >= 0x10000 && valid(c)) return [c, 4];
  }
  return [-1, 1];
}

class ByteBuffer {  // a growable Uint8Array
  constructor(n) { this.a = new Uint8Array(Math.max(16, n)); this.n = 0; }
  push(b) { if (this.n === this.a.length) this.grow(1); this.a[this.n++] = b; }
  pushAll(src, from, to) {
    if (this.n + (to - from) > this.a.length) this.grow(to - from);
    this.a.set(src.subarray(from, to), this.n); this.n += to - from;
  }
  grow(k) { const a = new Uint8Array(Math.max(2 * this.a.length, this.n + k)); a.set(this.a.subarray(0, this.n)); this.a = a; }
  endsWith(seq) {
    if (this.n < seq.length) return false;
    for (let i = 0; i < seq.length; i++) if (this.a[this.n - seq.length + i] !== seq[i]) return false;
    return true;
  }
  bytes() { return this.a.subarray(0, this.n); }
}

// ---------------------------------------------------------------------------------------------------------------------
// The normalizer (normalizer::Normalizer): replaces each longest charsmap match by its replacement (a character without one
// is kept), drops leading, trailing and repeated spaces (remove_extra_whitespaces), writes a space as ▁
// (escape_whitespaces) and puts ▁ in front of the text (add_dummy_prefix; at the end with treat_whitespace_as_suffix).

class Normalizer {
  constructor(spec, treatWhitespaceAsSuffix = false, matcher = null) {
    this.spec = spec; this.suffix = treatWhitespaceAsSuffix; this.matcher = matcher && !matcher.empty ? matcher : null;
    this.trie = null;
    const blob = spec.precompiledCharsmap;
    if (blob.length > 0) {  // DecodePrecompiledCharsMap
      if (blob.length <= 4) throw new Error("sentencepiece model: blob for normalization rule is broken");
      const trieSize = new DataView(blob.buffer, blob.byteOffset, 4).getUint32(0, true);
      if (trieSize >= blob.length) throw new Error("sentencepiece model: trie data size exceeds the input blob size");
      this.trie = new DoubleArray(blob.subarray(4, 4 + trieSize));
      this.replacements = blob.subarray(4 + trieSize);
    }
    // Set by normalizePrefix: the normalized text of the prefix is this.src[this.from .. this.to)
    this.src = null; this.from = 0; this.to = 0;
  }

  // Normalizer::NormalizePrefix: normalizes the longest rule at input[pos..); returns the number of input bytes consumed.
  normalizePrefix(input, pos) {
    const end = input.length;
    if (this.matcher) {  // user-defined symbols are kept as they are
      const n = this.matcher.match(i => input[i], pos, end);
      if (n > 0) { this.src = input; this.from = pos; this.to = pos + n; return n; }
    }
    if (this.trie) {
      const [length, value] = this.trie.longestPrefix(input, pos, end);
      if (length > 0) {
        const r = this.replacements;
        let stop = value;
        while (stop < r.length && r[stop] !== 0) stop++;  // replacements end in \0
        this.src = r; this.from = value; this.to = stop;
        return length;
      }
    }
    const [c, n] = decodeUtf8(input, pos, end);
    if (c < 0) { this.src = REPLACEMENT_BYTES; this.from = 0; this.to = 3; return 1; }  // malformed: U+FFFD for one byte
    this.src = input; this.from = pos; this.to = pos + n;
    return n;
  }

  isSpacePrefix() { return this.to - this.from === 1 && this.src[this.from] === 0x20; }

  // Normalizer::Normalize: UTF-8 bytes -> normalized UTF-8 bytes.
  normalize(input) {
    const spec = this.spec, n = input.length;
    if (n === 0) return input;
    let pos = 0;
    if (spec.removeExtraWhitespaces) {  // drops leading spaces
      while (pos < n) {
        const consumed = this.normalizePrefix(input, pos);
        if (!this.isSpacePrefix()) break;
        pos += consumed;
      }
    }
    if (pos === n) return new Uint8Array(0);  // all characters are spaces
    const out = new ByteBuffer(3 * (n - pos) + 3);
    const addWs = () => { if (spec.escapeWhitespaces) out.pushAll(SPACE_BYTES_U8, 0, 3); else out.push(0x20); };
    if (!this.suffix && spec.addDummyPrefix) addWs();
    let isPrevSpace = spec.removeExtraWhitespaces;
    while (pos < n) {
      const consumed = this.normalizePrefix(input, pos);
      const src = this.src, to = this.to;
      let from = this.from;
      while (isPrevSpace && from < to && src[from] === 0x20) from++;  // no space right after a space
      if (from < to) {
        for (let i = from; i < to; i++) {
          if (spec.escapeWhitespaces && src[i] === 0x20) out.pushAll(SPACE_BYTES_U8, 0, 3);
          else out.push(src[i]);
        }
        isPrevSpace = src[to - 1] === 0x20;
      }
      pos += consumed;
      if (!spec.removeExtraWhitespaces) isPrevSpace = false;
    }
    if (spec.removeExtraWhitespaces) {  // drops trailing spaces
      const space = spec.escapeWhitespaces ? SPACE_BYTES : [0x20];
      while (out.endsWith(space)) out.n -= space.length;
    }
    if (this.suffix && spec.addDummyPrefix) addWs();
    return out.bytes();
  }
}

// ---------------------------------------------------------------------------------------------------------------------
// BPE (bpe::Model::SampleEncode without dropout): start from characters (a user-defined symbol is one frozen symbol) and
// repeatedly merge the adjacent pair whose concatenation is the vocabulary piece with the highest score, the leftmost pair
// first on a tie. A priority queue holds the candidate pairs; a pair made stale by an earlier merge is skipped when popped.

class PairTable {  // integer key -> piece id: open addressing in typed arrays (encodes about 20% faster than with a Map)
  constructor(n) {  // room for n keys
    let size = 16;
    while (size < 2 * n) size *= 2;
    this.mask = size - 1; this.shift = 32 - Math.log2(size);
    this.keys = new Float64Array(size).fill(-1); this.values = new Int32Array(size);
  }
  set(k, v) {
    let i = this.slot(k);
    while (this.keys[i] !== -1 && this.keys[i] !== k) i = (i + 1) & this.mask;
    this.keys[i] = k; this.values[i] = v;
  }
  slot(k) { return Math.imul((k | 0) ^ ((k / 4294967296) | 0), 0x9e3779b1) >>> this.shift; }  // Fibonacci hashing
  get(k) {  // -> the value, or -1
    for (let i = this.slot(k); ; i = (i + 1) & this.mask) {
      const x = this.keys[i];
      if (x === k) return this.values[i];
      if (x === -1) return -1;
    }
  }
}

class BpeScratch {  // the per-sentence arrays of the BPE loop, kept between calls and grown as needed
  constructor() { this.cap = 0; this.ensure(256); }
  ensure(n) {
    if (n <= this.cap) return;
    const cap = this.cap = Math.max(n, 2 * this.cap);
    // symbols: where each starts in the text, its length (0 once merged into its left neighbour), its neighbours, its
    // symbol id (a piece id, or -1 for a string no merge starts from), whether it is frozen (a user-defined symbol)
    this.start = new Int32Array(cap); this.len = new Int32Array(cap); this.prev = new Int32Array(cap);
    this.next = new Int32Array(cap); this.sid = new Int32Array(cap); this.frozen = new Uint8Array(cap);
    // candidate pairs: at most n - 1 at first and two per merge (fewer than n merges)
    const m = 3 * cap;
    this.score = new Float64Array(m); this.left = new Int32Array(m); this.right = new Int32Array(m);
    this.size = new Int32Array(m); this.merged = new Int32Array(m); this.heap = new Int32Array(m);
    this.nPairs = 0; this.nHeap = 0;
  }
  // The agenda, a binary max-heap of pair indices: the higher score first, then the smaller left index (SymbolPairComparator).
  before(i, j) { return this.score[i] > this.score[j] || (this.score[i] === this.score[j] && this.left[i] < this.left[j]); }
  push(score, left, right, size, merged) {
    const p = this.nPairs++;
    this.score[p] = score; this.left[p] = left; this.right[p] = right; this.size[p] = size; this.merged[p] = merged;
    const h = this.heap;
    let i = this.nHeap++;
    while (i > 0) {
      const up = (i - 1) >> 1;
      if (!this.before(p, h[up])) break;
      h[i] = h[up]; i = up;
    }
    h[i] = p;
  }
  pop() {
    const h = this.heap, top = h[0], last = h[--this.nHeap], n = this.nHeap;
    let i = 0;
    for (;;) {
      const l = 2 * i + 1, r = l + 1;
      let m = last, at = -1;
      if (l < n && this.before(h[l], m)) { m = h[l]; at = l; }
      if (r < n && this.before(h[r], m)) { m = h[r]; at = r; }
      if (at < 0) break;
      h[i] = m; i = at;
    }
    h[i] = last;
    return top;
  }
}

export class SentencePiece {
  /** A tokenizer from the bytes of a sentencepiece model file (Uint8Array, ArrayBuffer or any ArrayBufferView). */
  static fromBytes(bytes) {
    if (bytes instanceof ArrayBuffer) bytes = new Uint8Array(bytes);
    else if (ArrayBuffer.isView(bytes) && !(bytes instanceof Uint8Array)) bytes = new Uint8Array(bytes.buffer, bytes.byteOffset, bytes.byteLength);
    if (!(bytes instanceof Uint8Array)) throw new TypeError("SentencePiece.fromBytes: expected a Uint8Array or an ArrayBuffer");
    return new SentencePiece(parseModelProto(bytes));
  }

  constructor(proto) {
    const t = proto.trainerSpec;
    this.proto = proto;
    if (proto.pieces.length === 0) throw new Error("sentencepiece model: no pieces (is this a sentencepiece model file?)");
    this.modelType = MODEL_TYPE[t.modelType] || `type ${t.modelType}`;
    if (this.modelType !== "bpe") throw new Error(`sentencepiece model: model_type ${this.modelType} is not supported (BPE only)`);
    this.initializePieces();
    this.normalizer = new Normalizer(proto.normalizerSpec, t.treatWhitespaceAsSuffix,
                                     new PrefixMatcher(this.userDefined.map(s => utf8.encode(s))));
    this.denormalizer = proto.denormalizerSpec && proto.denormalizerSpec.precompiledCharsmap.length > 0
      ? new Normalizer(proto.denormalizerSpec) : null;
    this.unkSurface = t.unkSurface === null ? " \u2047 " : t.unkSurface;
    // The special ids, as SentencePieceProcessor::unk_id() etc.: the id of the piece if it has the right type, else -1.
    const special = (piece, type) => { const id = this.pieceToId(piece); return this.types[id] === type ? id : -1; };
    this.unkId = special(t.unkPiece || "<unk>", TYPE.UNKNOWN);
    this.bosId = special(t.bosPiece || "<s>", TYPE.CONTROL);
    this.eosId = special(t.eosPiece || "</s>", TYPE.CONTROL);
    this.padId = special(t.padPiece || "<pad>", TYPE.CONTROL);
  }

  // ModelInterface::InitializePieces, with its checks.
  initializePieces() {
    const pieces = this.proto.pieces, byteFallback = this.proto.trainerSpec.byteFallback;
    this.pieces = pieces.map(p => p.piece);
    this.surfaces = this.pieces.map(p => p.replaceAll(SPACE, " "));
    this.scores = Float64Array.from(pieces, p => p.score);
    this.types = Uint8Array.from(pieces, p => p.type);
    this.normal = new Map();    // NORMAL, USER_DEFINED and UNUSED pieces: what BPE may produce
    this.reserved = new Map();  // CONTROL, UNKNOWN and BYTE pieces
    this.userDefined = [];
    this.unk = -1;
    this.byteIds = new Int32Array(256).fill(-1);
    pieces.forEach(({piece, type}, id) => {
      if (piece === "") throw new Error("sentencepiece model: piece must not be empty");
      const isNormal = type === TYPE.NORMAL || type === TYPE.USER_DEFINED || type === TYPE.UNUSED;
      const map = isNormal ? this.normal : this.reserved;
      if (map.has(piece)) throw new Error(`sentencepiece model: ${piece} is already defined`);
      map.set(piece, id);
      if (type === TYPE.USER_DEFINED) this.userDefined.push(piece);
      if (type === TYPE.UNKNOWN) {
        if (this.unk >= 0) throw new Error("sentencepiece model: unk is already defined");
        this.unk = id;
      }
      if (type === TYPE.BYTE) {
        if (!byteFallback) throw new Error(`sentencepiece model: byte piece ${piece} is found although byte_fallback is false`);
        const m = /^<0x([0-9A-F]{2})>$/.exec(piece);
        if (!m) throw new Error(`sentencepiece model: byte piece ${piece} is invalid`);
        this.byteIds[parseInt(m[1], 16)] = id;
      }
    });
    if (this.unk < 0) throw new Error("sentencepiece model: unk is not defined");
    if (byteFallback && this.byteIds.includes(-1)) throw new Error("sentencepiece model: there are not 256 byte pieces although byte_fallback is true");
    this.byteFallback = byteFallback;
    this.matcher = new PrefixMatcher(this.userDefined.map(s => Array.from({length: s.length}, (_, i) => s.charCodeAt(i))));
    this.buildMergeTable();
  }

  get vocabSize() { return this.pieces.length; }
  /** The id of a piece; the unknown id for a string that is no piece (as sp.piece_to_id). */
  pieceToId(piece) {
    const r = this.reserved.get(piece);
    if (r !== undefined) return r;
    const n = this.normal.get(piece);
    return n !== undefined ? n : this.unk;
  }
  /** The piece of an id (as sp.id_to_piece). */
  idToPiece(id) { this.checkId(id); return this.pieces[id]; }
  checkId(id) {
    if (!Number.isInteger(id) || id < 0 || id >= this.pieces.length) throw new RangeError(`piece id is out of range: ${id}`);
  }
  isControl(id) { return this.types[id] === TYPE.CONTROL; }
  isUnknown(id) { return this.types[id] === TYPE.UNKNOWN; }
  isByte(id) { return this.types[id] === TYPE.BYTE; }

  /** The normalized text (▁ for spaces, the charsmap's replacements), as sp.normalize(text). */
  normalize(text) { return fromUtf8.decode(this.normalizer.normalize(utf8.encode(text))); }

  // The merge table behind BPE's lookups: bpe::Model looks up the concatenation of two adjacent symbols among the pieces;
  // here each symbol carries an id and a pair of ids is looked up instead (same answer, no string built per candidate).
  // A symbol's id is its piece id, or, for a string that is no piece but is the left or right part of one (a character
  // that is no piece, in a model with user-defined or hand-made pieces), a further id; any other string gets -1 and never
  // merges. this.merges: left id * this.nSymbols + right id -> id of the piece they make.
  buildMergeTable() {
    const symbolIds = new Map(this.normal);
    const symbolId = s => { let id = symbolIds.get(s); if (id === undefined) symbolIds.set(s, id = symbolIds.size + this.pieces.length); return id; };
    const pairs = [];  // left id, right id, piece id, ...
    for (const [piece, id] of this.normal) {
      for (let k = 1; k < piece.length; k++) {
        if ((piece.charCodeAt(k) & 0xfc00) === 0xdc00) continue;  // not inside a surrogate pair
        pairs.push(symbolId(piece.slice(0, k)), symbolId(piece.slice(k)), id);
      }
    }
    const K = this.nSymbols = this.pieces.length + symbolIds.size;
    this.merges = new PairTable(pairs.length / 3);
    for (let i = 0; i < pairs.length; i += 3) this.merges.set(pairs[i] * K + pairs[i + 1], pairs[i + 2]);
    this.symbolIds = symbolIds;
    this.charSymbol = new Int32Array(0x10000).fill(-1);  // the symbol id of each character of the basic plane
    for (const [s, id] of symbolIds) if (s.length === 1) this.charSymbol[s.charCodeAt(0)] = id;
    this.scratch = new BpeScratch();
  }

  // bpe::Model::SampleEncode (alpha = 0) on the normalized text -> [[piece, id], ...]
  bpe(text) {
    const n = text.length;
    if (n === 0) return [];
    const w = this.scratch;
    w.ensure(n);
    w.nPairs = w.nHeap = 0;
    const {start, len, prev, next, sid, frozen} = w;
    // Splits the input into characters (UTF-16 code units; a surrogate pair is one character) and user-defined symbols.
    let count = 0;
    for (let i = 0; i < n;) {
      let m = this.matcher.empty ? 0 : this.matcher.match(k => text.charCodeAt(k), i, n), s = -1;
      frozen[count] = m > 0 ? 1 : 0;
      if (m === 0) {
        const c = text.charCodeAt(i);
        if ((c & 0xfc00) === 0xd800 && i + 1 < n && (text.charCodeAt(i + 1) & 0xfc00) === 0xdc00) {
          m = 2; const id = this.symbolIds.get(text.substr(i, 2)); s = id === undefined ? -1 : id;
        } else { m = 1; s = this.charSymbol[c]; }
      }
      start[count] = i; len[count] = m; sid[count] = s; prev[count] = count - 1;
      i += m;
      next[count] = i < n ? count + 1 : -1;
      count++;
    }
    let revMerge = null;  // unused piece -> the two strings it was made of
    const maybeAddPair = (left, right) => {  // MaybeAddNewSymbolPair
      if (left === -1 || right === -1 || frozen[left] || frozen[right] || sid[left] < 0 || sid[right] < 0) return;
      const id = this.merges.get(sid[left] * this.nSymbols + sid[right]);
      if (id < 0) return;
      w.push(this.scores[id], left, right, len[left] + len[right], id);
      if (this.types[id] === TYPE.UNUSED) {
        (revMerge ||= new Map()).set(this.pieces[id], [text.substr(start[left], len[left]), text.substr(start[right], len[right])]);
      }
    };
    for (let i = 1; i < count; i++) maybeAddPair(i - 1, i);
    while (w.nHeap > 0) {
      const p = w.pop(), left = w.left[p], right = w.right[p];
      // `p` is stale if either symbol has changed since (a merge only makes a symbol longer, or empty)
      if (len[left] === 0 || len[right] === 0 || len[left] + len[right] !== w.size[p]) continue;
      len[left] = w.size[p]; sid[left] = w.merged[p];  // merges right into left
      next[left] = next[right];
      if (next[right] >= 0) prev[next[right]] = left;
      len[right] = 0;
      maybeAddPair(prev[left], left);
      maybeAddPair(left, next[left]);
    }
    const out = [];
    const resegment = piece => {  // an unused piece is split back into the two pieces it was merged from
      const id = this.normal.has(piece) ? this.normal.get(piece) : -1;
      const parts = id >= 0 && this.types[id] === TYPE.UNUSED && revMerge ? revMerge.get(piece) : undefined;
      if (parts === undefined) { out.push([piece, this.pieceToId(piece)]); return; }
      resegment(parts[0]); resegment(parts[1]);
    };
    for (let i = 0; i !== -1; i = next[i]) {
      const piece = text.substr(start[i], len[i]);
      if (revMerge) resegment(piece); else out.push([piece, this.pieceToId(piece)]);
    }
    return out;
  }

  // SentencePieceProcessor::Encode + PopulateSentencePieceText -> [[piece, id], ...]: an unknown character becomes its
  // UTF-8 bytes with byte fallback; without it, a run of unknown pieces is one <unk>.
  encodeToPairs(text) {
    if (typeof text !== "string") throw new TypeError(`expected a string, got ${typeof text}`);
    const normalized = this.normalize(text);
    const out = [];
    let prevUnk = false;
    for (const [piece, id] of this.bpe(normalized)) {
      const unk = this.isUnknown(id);
      if (unk && this.byteFallback) {
        for (const b of utf8.encode(piece)) out.push([this.pieces[this.byteIds[b]], this.byteIds[b]]);
      } else if (unk && prevUnk) {
        out[out.length - 1][0] += piece;
      } else {
        out.push([piece, id]);
      }
      prevUnk = unk;
    }
    return out;
  }

  /** Ids of a text, as Python's sp.encode(text, add_bos=addBos, add_eos=addEos); no BOS/EOS by default. */
  encode(text, {addBos = false, addEos = false} = {}) {
    const ids = this.encodeToPairs(text).map(p => p[1]);
    if (addBos) { if (this.bosId < 0) throw new Error("bos_id is not defined"); ids.unshift(this.bosId); }
    if (addEos) { if (this.eosId < 0) throw new Error("eos_id is not defined"); ids.push(this.eosId); }
    return ids;
  }

  /** Pieces of a text, as sp.encode(text, out_type=str). */
  encodeAsPieces(text) { return this.encodeToPairs(text).map(p => p[0]); }

  // SentencePieceProcessor::Decode, DecodeSentencePiece: the surface of one non-byte piece -> [surface, hasBosWs].
  decodePiece(id, isBosWs) {
    if (this.isControl(id)) return ["", false];  // <s>, </s>, <pad>: invisible
    if (this.isUnknown(id)) return [this.unkSurface, false];
    const surface = this.surfaces[id], spec = this.proto.normalizerSpec;  // the piece with ▁ written as a space
    if (isBosWs && (spec.addDummyPrefix || spec.removeExtraWhitespaces) && this.pieces[id].startsWith(SPACE)) {
      // the ▁ the normalizer put in front is not part of the text; with remove_extra_whitespaces, every leading ▁ goes
      return [surface.slice(1), !spec.removeExtraWhitespaces];
    }
    return [surface, false];
  }

  // The text of a run of byte pieces: each valid UTF-8 character, and U+FFFD for each byte that starts no valid one.
  static bytesToText(bytes) {
    let s = "";
    for (let pos = 0; pos < bytes.length;) {
      const [c, n] = decodeUtf8(bytes, pos, bytes.length);
      s += c < 0 ? "\ufffd" : String.fromCodePoint(c);
      pos += n;
    }
    return s;
  }

  /** Text of ids, as sp.decode(ids): control ids are dropped, byte pieces are joined into UTF-8 characters. */
  decode(ids) {
    ids = Array.from(ids, Number);
    for (const id of ids) this.checkId(id);
    let text = "", isBosWs = true, bosWsSeen = false, bytes = [];
    const flushBytes = () => { if (bytes.length) { text += SentencePiece.bytesToText(bytes); bytes = []; } };
    for (const id of ids) {
      if (this.isByte(id)) { bytes.push(parseInt(this.pieces[id].slice(3, 5), 16)); continue; }
      flushBytes();
      if (bosWsSeen || text.length > 0) isBosWs = false;
      let decoded;
      [decoded, bosWsSeen] = this.decodePiece(id, isBosWs);
      text += decoded;
    }
    flushBytes();
    if (this.denormalizer) text = fromUtf8.decode(this.denormalizer.normalize(utf8.encode(text)));
    return text;
  }
}

/** A tokenizer from the bytes of a model file (Uint8Array, ArrayBuffer), or from a URL to fetch it from. */
export async function loadSentencePiece(source) {
  if (typeof source === "string" || source instanceof URL) {
    const r = await fetch(source);
    if (!r.ok) throw new Error(`${source}: HTTP ${r.status}`);
    source = await r.arrayBuffer();
  }
  return SentencePiece.fromBytes(source);
}
