// What the live boxes accept (docs_src/_static/live/live.js, `checkInput`): one clear message for text no model
// should run on, the text itself (spaces folded) otherwise.
import test from 'node:test';
import assert from 'node:assert/strict';
import {checkInput} from '../../docs_src/_static/live/live.js';

test('empty or blank text asks for a sentence', () => {
  for (const t of ['', '   ', '\n\t ']) assert.deepEqual(checkInput(t), {error: 'Type a sentence first.'});
});

test('text with no letter or digit is refused in one line', () => {
  for (const t of ['?!... ,;:', '😀🚲🎉 👍', '— – …', '()[]{}']) {
    const r = checkInput(t);
    assert.match(r.error, /no words, only punctuation or symbols/, t);
    assert.equal(r.text, undefined);
  }
});

test('any script, digits, and words among symbols are accepted', () => {
  for (const t of ['Ein Hund läuft.', '一只狗在雪地里奔跑。', '42', 'Ein Hund 🐕 läuft ❄️.', 'Ça va ?'])
    assert.equal(checkInput(t).error, undefined, t);
  assert.deepEqual(checkInput('  Ein   Hund\n läuft. '), {text: 'Ein Hund läuft.'});
});

test('more than 100 words is refused, naming the count', () => {
  assert.match(checkInput(Array(101).fill('Hund').join(' ')).error, /^That is 101 words; .* at most 100 words/);
  assert.equal(checkInput(Array(100).fill('Hund').join(' ')).error, undefined);
});
