// docs_src/_static/live/spm.js against Python's sentencepiece, on the edge cases of tests/fixtures/spm_ids.json
// (written by tools/make_spm_fixture.py with the shipped model pretrained/multi30k-de-en/spm.model). Run: node --test tests/js/
import {test} from "node:test";
import assert from "node:assert/strict";
import {readFileSync} from "node:fs";
import {createHash} from "node:crypto";
import {SentencePiece, loadSentencePiece, parseModelProto} from "../../docs_src/_static/live/spm.js";

const root = new URL("../../", import.meta.url);
const fixture = JSON.parse(readFileSync(new URL("tests/fixtures/spm_ids.json", root), "utf8"));
const bytes = readFileSync(new URL(fixture.model, root));
const sp = SentencePiece.fromBytes(bytes);

test("the fixture was made from the shipped model", () => {
  assert.equal(createHash("sha256").update(bytes).digest("hex"), fixture.model_sha256,
               `${fixture.model} changed: run python tools/make_spm_fixture.py`);
});

test("vocabulary size and special ids as the model file says", () => {
  assert.equal(sp.vocabSize, fixture.vocab_size);
  assert.deepEqual([sp.unkId, sp.bosId, sp.eosId, sp.padId], [fixture.unk_id, fixture.bos_id, fixture.eos_id, fixture.pad_id]);
});

test("normalize as sp.normalize", () => {
  for (const c of fixture.encode) assert.equal(sp.normalize(c.text), c.normalized, JSON.stringify(c.text));
});

test("encode gives Python's ids on every edge case", () => {
  for (const c of fixture.encode) assert.deepEqual(sp.encode(c.text), c.ids, JSON.stringify(c.text));
});

test("encode with BOS and EOS as sp.encode(text, add_bos=True, add_eos=True)", () => {
  for (const c of fixture.encode) assert.deepEqual(sp.encode(c.text, {addBos: true, addEos: true}), c.ids_bos_eos, JSON.stringify(c.text));
});

test("encodeAsPieces gives Python's pieces", () => {
  for (const c of fixture.encode) assert.deepEqual(sp.encodeAsPieces(c.text), c.pieces, JSON.stringify(c.text));
});

test("decode(encode(text)) as Python's", () => {
  for (const c of fixture.encode) assert.equal(sp.decode(sp.encode(c.text)), c.decoded, JSON.stringify(c.text));
});

test("decode of id lists: byte runs (valid, truncated, invalid UTF-8), control and unknown ids, random lists", () => {
  for (const c of fixture.decode) assert.equal(sp.decode(c.ids), c.text, JSON.stringify(c.ids));
  // ids as ONNX Runtime hands them back (BigInt64Array) decode the same
  for (const c of fixture.decode) assert.equal(sp.decode(BigInt64Array.from(c.ids, BigInt)), c.text, JSON.stringify(c.ids));
});

test("decode refuses the ids Python refuses", () => {
  for (const ids of fixture.decode_refused) assert.throws(() => sp.decode(ids), RangeError, JSON.stringify(ids));
});

test("pieceToId and idToPiece as Python's piece_to_id and id_to_piece", () => {
  for (const [piece, id] of Object.entries(fixture.piece_to_id)) assert.equal(sp.pieceToId(piece), id, piece);
  for (const [id, piece] of Object.entries(fixture.id_to_piece)) assert.equal(sp.idToPiece(Number(id)), piece, id);
  assert.throws(() => sp.idToPiece(sp.vocabSize), RangeError);
});

test("loads from an ArrayBuffer and from a Uint8Array inside a larger buffer", async () => {
  const text = fixture.encode.find(c => c.text.includes("Männer")).text;
  const want = sp.encode(text);
  const ab = bytes.buffer.slice(bytes.byteOffset, bytes.byteOffset + bytes.byteLength);
  assert.deepEqual((await loadSentencePiece(ab)).encode(text), want);
  const padded = new Uint8Array(bytes.length + 7);
  padded.set(bytes, 3);
  assert.deepEqual(SentencePiece.fromBytes(padded.subarray(3, 3 + bytes.length)).encode(text), want);
});

test("a model that is not BPE, broken files and a text that is not a string are refused", () => {
  // a copy of the model with trainer_spec.model_type = UNIGRAM appended (a later field wins, as protobuf reads it)
  const unigram = new Uint8Array([...bytes, 0x12, 0x02, 0x18, 0x01]);
  assert.equal(parseModelProto(unigram).trainerSpec.modelType, 1);
  assert.throws(() => SentencePiece.fromBytes(unigram), /model_type unigram is not supported/);
  assert.throws(() => SentencePiece.fromBytes(bytes.subarray(0, 1000)), /truncated/);
  assert.throws(() => SentencePiece.fromBytes(new Uint8Array(0)), /no pieces/);
  assert.throws(() => SentencePiece.fromBytes("spm.model"), TypeError);
  assert.throws(() => sp.encode(null), TypeError);
});
