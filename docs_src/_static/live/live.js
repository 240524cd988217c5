/* The live book: the shipped models run in the reader's browser, from this site only (onnxruntime-web, wasm, one
 * thread). A page opts in with one of these elements, and loads this file as a module:
 *
 *   <div class="live-translate" data-model="multi30k-de-en"></div>   a box to translate German or English
 *   <div class="live-parse"></div>                                     a box to parse an English sentence, tree drawn
 *   <div class="live-explorer" data-model="multi30k-de-en" data-target="NAME"></div>
 *        a box whose sentence is translated and then drawn, every head of every layer, by the attention explorer
 *        into <div class="attention-explorer" data-name="NAME">, whose stored example stays while the model loads
 *
 * The models' files (made from pretrained/ when the site is built) are listed with their sizes in
 * _static/models/index.json. They are fetched only when a box needs them, and kept by the Cache API (loader.js).
 * Everything the reader types is shown with textContent, never as HTML.
 */
import {fetchBytes, megabytes} from './loader.js';
import {Translator} from './translator.js';
import {drawTree, parseBracketed} from './treeview.js';

const STATIC = new URL('../', import.meta.url);  // <site>/_static/
const EXAMPLES = {
  'multi30k-de-en': 'Eine Frau mit einem roten Hut liest ein Buch im Park.',
  'multi30k-en-de': 'A man in a blue shirt is playing the guitar on the street.',
};
const MAX_WORDS = 100;  // longer input is refused with a message before any model runs

let indexPromise = null, ortPromise = null;
const models = {};  // name -> Promise of a loaded model

function el(tag, attrs = {}, parent = null, text) {
  const e = document.createElement(tag);
  for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
  if (text !== undefined) e.textContent = text;
  if (parent) parent.appendChild(e);
  return e;
}

export function siteIndex() {
  indexPromise ??= fetch(new URL('models/index.json', STATIC), {cache: 'no-cache'}).then(r => {
    if (!r.ok) throw new Error(`models/index.json: the server answered ${r.status}; the site was built without its models`);
    return r.json();
  });
  return indexPromise;
}

/** onnxruntime-web, its wasm fetched through the cache like the model files. */
export function runtime(onProgress) {
  ortPromise ??= (async () => {
    const index = await siteIndex();
    const ort = await import(new URL('ort/' + index.runtime.module, STATIC).href);
    const wasm = index.runtime.files.find(f => f.name.endsWith('.wasm'));
    ort.env.wasm.numThreads = 1;
    ort.env.logLevel = 'error';  // its warnings (e.g. an unknown CPU vendor inside wasm) are not the reader's concern
    ort.env.wasm.proxy = false;
    ort.env.wasm.wasmPaths = new URL('ort/', STATIC).href;
    ort.env.wasm.wasmBinary = await fetchBytes(new URL(`ort/${wasm.name}?v=${wasm.sha256.slice(0, 12)}`, STATIC).href, {onProgress});
    return ort;
  })();
  return ortPromise;
}

/** Load a model by name (translator or parser), reporting progress over all its files and the runtime. */
export function loadModel(name, onStatus = () => {}) {
  models[name] ??= (async () => {
    const index = await siteIndex(), entry = index.models[name];
    if (!entry) throw new Error(`no model "${name}" in this site's models/index.json`);
    const files = [...index.runtime.files, ...entry.files], total = files.reduce((a, f) => a + f.bytes, 0);
    const done = {};
    const progress = name => (loaded, _t, cached) => {
      done[name] = loaded;
      const n = Object.values(done).reduce((a, b) => a + b, 0);
      onStatus(`Loading ${entry.title}: ${megabytes(n)} of ${megabytes(total)}${cached ? ' (from your browser\'s cache)' : ''}`);
    };
    const ort = await runtime(progress('runtime'));
    const load = async file => {
      const f = entry.files.find(x => x.name === file);
      if (!f) throw new Error(`${name}: ${file} is not among the model's files`);
      return fetchBytes(new URL(`models/${name}/${file}?v=${f.sha256.slice(0, 12)}`, STATIC).href, {onProgress: progress(file)});
    };
    if (entry.kind === 'parser') {
      const {createParser} = await import('./parser.js');
      return createParser(ort, load);
    }
    return Translator.load(ort, load);
  })();
  models[name].catch(() => { delete models[name]; });  // a failed load may be tried again
  return models[name];
}

function words(text) { return text.trim() ? text.trim().split(/\s+/).length : 0; }

/** The reader's text, or a message saying why it cannot be used. */
export function checkInput(text) {
  if (!text.trim()) return {error: 'Type a sentence first.'};
  if (!/[\p{L}\p{N}]/u.test(text)) return {error: 'That has no words, only punctuation or symbols: type a sentence.'};
  const n = words(text);
  if (n > MAX_WORDS) return {error: `That is ${n} words; the in-page model takes one sentence of at most ${MAX_WORDS} words. Try a shorter one.`};
  return {text: text.replace(/\s+/g, ' ').trim()};
}

function statusLine(root, cls = 'live-status') {
  const p = el('p', {class: cls, role: 'status', 'aria-live': 'polite'}, root);
  return {
    set(msg, kind = 'info') { p.textContent = msg; p.dataset.kind = kind; },
  };
}

async function sizeNote(root, names, prefix) {
  try {
    const index = await siteIndex();
    const rt = index.runtime.files.reduce((a, f) => a + f.bytes, 0);
    const parts = names.map(n => `${index.models[n].title}: ${megabytes(index.models[n].files.reduce((a, f) => a + f.bytes, 0))}`);
    root.textContent = `${prefix} The download is ${parts.join('; ')}; the runtime (onnxruntime-web) ${megabytes(rt)}, once for all models. ` +
      'Your browser keeps the files after the first visit; nothing you type leaves this page.';
  } catch (e) { root.textContent = e.message; }
}

/**
 * Wire a box's button: check the reader's text, load the model (its progress on a line of its own), then run
 * `work(model, text)`, whose returned message, or the error's, goes to the status line. A RangeError (too long) is
 * the reader's to fix and is shown as it is. `clear` empties the box's output first, so that a run that fails never
 * leaves the last sentence's result on show as if it were this one's.
 */
function onRun({go, box, status, progress, model, what, doing, failed, clear = () => {}}, work) {
  go.addEventListener('click', async () => {
    clear();
    const input = checkInput(box.value);
    if (input.error) { status.set(input.error, 'error'); return; }
    go.disabled = true;
    try {
      status.set(`Waiting for the ${what}…`);
      const m = await loadModel(model(), msg => progress.set(msg));
      progress.set(`The ${what} is loaded.`);
      status.set(doing);
      status.set(await work(m, input.text));
    } catch (e) {
      status.set(e instanceof RangeError ? e.message : `${failed}: ${e.message}`, 'error');
    } finally { go.disabled = false; }
  });
}

function translateBox(root) {
  root.textContent = '';
  const names = (root.dataset.models || 'multi30k-de-en multi30k-en-de').split(/\s+/);
  let model = root.dataset.model || names[0];
  const bar = el('div', {class: 'live-bar'}, root);
  const pick = el('select', {'aria-label': 'direction', class: 'live-direction'}, bar);
  const titles = {'multi30k-de-en': 'German → English', 'multi30k-en-de': 'English → German'};
  for (const n of names) el('option', {value: n}, pick, titles[n] || n).selected = n === model;
  const decoding = el('select', {'aria-label': 'decoding', class: 'live-decoding'}, bar);
  el('option', {value: '4'}, decoding, 'beam search, 4 beams');
  el('option', {value: '1'}, decoding, 'greedy decoding');
  const box = el('textarea', {class: 'live-input', rows: 2, 'aria-label': 'sentence to translate', maxlength: 20000}, root);
  box.value = EXAMPLES[model] || '';
  const go = el('button', {type: 'button', class: 'live-go'}, root, 'Translate');
  const out = el('p', {class: 'live-output', 'aria-label': 'translation'}, root);
  const status = statusLine(root), progress = statusLine(root, 'live-progress');
  const note = el('p', {class: 'live-note'}, root);
  sizeNote(note, names, 'The model runs in this page.');
  const warm = () => loadModel(model, m => progress.set(m)).then(() => progress.set('The model is loaded.'),
                                                               e => progress.set(`The model could not be loaded: ${e.message}`, 'error'));
  pick.addEventListener('change', () => {
    const was = EXAMPLES[model]; model = pick.value;
    if (!box.value.trim() || box.value === was) box.value = EXAMPLES[model] || '';
    out.textContent = ''; warm();
  });
  onRun({go, box, status, progress, model: () => model, what: 'model', doing: 'Translating…', failed: 'Could not translate',
         clear: () => { out.textContent = ''; }}, async (tr, text) => {
    const t0 = performance.now();
    const r = await tr.translate(text, {beamSize: Number(decoding.value)});
    out.textContent = r.text;
    root.dispatchEvent(new CustomEvent('live-done', {detail: r}));
    return `Translated in ${((performance.now() - t0) / 1000).toFixed(2)} s, in this page (${r.tokens.length} subword tokens out).`;
  });
  if (root.dataset.load !== 'click') warm();
}

function parseBox(root) {
  root.textContent = '';
  const box = el('input', {type: 'text', class: 'live-input', 'aria-label': 'English sentence to parse', maxlength: 20000}, root);
  box.value = root.dataset.example || 'The old man saw the boy with a telescope in the park.';
  const go = el('button', {type: 'button', class: 'live-go'}, root, 'Parse');
  const words = el('p', {class: 'live-words'}, root);
  const tree = el('div', {class: 'live-tree'}, root);
  const bracketed = el('pre', {class: 'live-bracketed'}, root);
  const status = statusLine(root), progress = statusLine(root, 'live-progress');
  const note = el('p', {class: 'live-note'}, root);
  sizeNote(note, ['ptb-chart'], 'The parser loads when you press Parse.');
  onRun({go, box, status, progress, model: () => 'ptb-chart', what: 'parser', doing: 'Parsing…', failed: 'Could not parse',
         clear: () => { words.textContent = ''; tree.textContent = ''; bracketed.textContent = ''; }}, async (parser, text) => {
    const t0 = performance.now();
    const r = await parser.parse(text);
    words.textContent = 'Penn Treebank words: ' + r.words.join('  ');
    bracketed.textContent = r.bracketed;
    tree.textContent = '';
    drawTree(tree, parseBracketed(r.bracketed));
    const n = r.words.length;
    return `Parsed in ${((performance.now() - t0) / 1000).toFixed(2)} s, in this page (${n} ${n === 1 ? 'word' : 'words'}).`;
  });
}

function explorerBox(root) {
  root.textContent = '';
  const model = root.dataset.model || 'multi30k-de-en', target = root.dataset.target || model;
  const box = el('input', {type: 'text', class: 'live-input', 'aria-label': 'your sentence for the attention explorer', maxlength: 20000}, root);
  box.value = root.dataset.example || EXAMPLES[model] || '';
  const go = el('button', {type: 'button', class: 'live-go'}, root, 'Translate and draw its attention');
  const status = statusLine(root), progress = statusLine(root, 'live-progress');
  status.set('The example below is a stored run; type your own sentence to see the model attend to it.');
  onRun({go, box, status, progress, model: () => model, what: 'model', doing: 'Translating…', failed: 'Could not translate'},
        async (tr, text) => {
    const rec = await tr.record(text);
    const view = document.querySelector(`.attention-explorer[data-name="${target}"]`);
    const stored = (window.ATTENTION_DATA || {})[target];
    const data = {name: target, scale: stored?.scale || 1, n_layers: tr.meta.n_layers, n_heads: tr.meta.n_heads,
                  sentences: [rec, ...(stored?.sentences || [])]};
    window.AttentionExplorer.draw(view, data);
    return `Your sentence, translated in this page: ${rec.translation}`;
  });
}

export function start() {
  document.querySelectorAll('.live-translate').forEach(translateBox);
  document.querySelectorAll('.live-parse').forEach(parseBox);
  document.querySelectorAll('.live-explorer').forEach(explorerBox);
}

if (typeof document !== 'undefined') {  // loaded by ../live_boot.js, over http only
  if (document.readyState === 'loading') document.addEventListener('DOMContentLoaded', start);
  else start();
}
