// Reading and laying out bracketed trees (docs_src/_static/live/treeview.js).
import test from 'node:test';
import assert from 'node:assert/strict';
import {layout, parseBracketed} from '../../docs_src/_static/live/treeview.js';

test('a bracketed tree reads back to its labels and words', () => {
  const t = parseBracketed('(S (NP (DT The) (NN cat)) (VP (VBD sat)) (. .))');
  assert.equal(t.label, 'S');
  assert.deepEqual(t.children.map(c => c.label), ['NP', 'VP', '.']);
  assert.deepEqual(t.children[0].children.map(c => c.word), ['The', 'cat']);
  assert.equal(parseBracketed('( (S (NN x)))').label, 'S', "PTB's unlabelled outer brackets are dropped");
});

test('unbalanced or trailing text is refused', () => {
  assert.throws(() => parseBracketed('(S (NN x)'), /unbalanced|expected/);
  assert.throws(() => parseBracketed('(S (NN x)) (X y)'), /after the tree/);
  assert.throws(() => parseBracketed('(NN x y)'), /more than one word/);
});

test('layout puts each word in its own column and each label over the middle of its span', () => {
  const {nodes, edges, width, depth} = layout(parseBracketed('(S (NP (DT The) (NN cat)) (VP (VBD sat)))'));
  assert.equal(width, 3);
  assert.equal(depth, 2);
  const at = l => nodes.find(n => n.label === l);
  assert.equal(at('NP').x, 0.5);
  assert.equal(at('VP').x, 2);
  assert.equal(at('S').x, 1.25);
  assert.deepEqual(nodes.filter(n => n.word).map(n => [n.word, n.x]), [['The', 0], ['cat', 1], ['sat', 2]]);
  assert.equal(edges.length, 5);
});
