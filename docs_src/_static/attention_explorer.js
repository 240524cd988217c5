/* Attention explorer: every head of every layer of a trained model, drawn from exported weights.
 *
 * Hand-written, no library, no network: a page holds <div class="attention-explorer" data-name="NAME"> and loads
 * the data as a script that sets window.ATTENTION_DATA[NAME] (the docs build writes it from results/attention/NAME.json).
 * Weights are stored as integers: weight = value / scale, and every query's row sums to scale (a sentence's own
 * `scale`, else the file's). A sentence translated in the page (live.js) carries its weights as they are, scale 1.
 *
 * Reading: a query token (left, or the rows of a heatmap) attends to key tokens (right, or the columns).
 * Every drawn weight carries data-head, data-q, data-k and data-w (the weight), so that a test can read what is shown.
 */
(function () {
  "use strict";
  const SVG = "http://www.w3.org/2000/svg";
  const COLORS = ["#1f77b4", "#ff7f0e", "#2ca02c", "#d62728", "#9467bd", "#8c564b", "#e377c2", "#7f7f7f",
                  "#bcbd22", "#17becf", "#393b79", "#637939", "#8c6d31", "#843c39", "#7b4173", "#3182bd"];
  const KINDS = {
    encoder: {label: "encoder self-attention", q: "src_tokens", k: "src_tokens"},
    self: {label: "decoder self-attention", q: "tgt_tokens", k: "tgt_tokens"},
    cross: {label: "encoder-decoder attention", q: "tgt_tokens", k: "src_tokens"},
  };
  const ROW = 18;  // pixels per token in the lines view

  function el(tag, attrs, parent, text) {
    const ns = ["svg", "line", "rect", "text", "g", "title"].includes(tag);
    const e = ns ? document.createElementNS(SVG, tag) : document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    if (parent) parent.appendChild(e);
    return e;
  }

  function select(parent, label, options, value, onchange) {
    const wrap = el("label", {class: "ae-control"}, parent, label + " ");
    const s = el("select", {"aria-label": label}, wrap);
    options.forEach(([v, t]) => { const o = el("option", {value: v}, s, t); if (String(v) === String(value)) o.selected = true; });
    s.addEventListener("change", () => onchange(s.value));
    return s;
  }

  function Explorer(root, data) {
    const st = {sentence: 0, kind: "cross", layer: data.n_layers - 1, heads: new Set([...Array(data.n_heads).keys()]),
                view: "lines", focus: null};
    root.textContent = "";
    root.classList.add("ae-ready");
    const controls = el("div", {class: "ae-controls"}, root);
    const note = el("p", {class: "ae-note"}, root);
    const main = el("div", {class: "ae-main"}, root);
    const thumbsTitle = el("p", {class: "ae-thumbs-title"}, root);
    const thumbs = el("div", {class: "ae-thumbs"}, root);

    const weights = () => data.sentences[st.sentence].attention[st.kind][st.layer];  // [head][query][key]
    const scale = () => data.sentences[st.sentence].scale || data.scale;
    const tokens = (side) => data.sentences[st.sentence][KINDS[st.kind][side]];

    function drawControls() {
      controls.textContent = "";
      select(controls, "sentence", data.sentences.map((s, i) => [i, s.title]), st.sentence,
             v => { st.sentence = +v; st.focus = null; draw(); });
      select(controls, "attention", Object.entries(KINDS).map(([k, v]) => [k, v.label]), st.kind,
             v => { st.kind = v; st.focus = null; draw(); });
      select(controls, "layer", [...Array(data.n_layers).keys()].map(l => [l, "layer " + l]), st.layer,
             v => { st.layer = +v; draw(); });
      const hs = el("span", {class: "ae-control ae-heads"}, controls, "heads ");
      for (let h = 0; h < data.n_heads; h++) {
        const lab = el("label", {class: "ae-head", style: `border-color:${COLORS[h % COLORS.length]}`}, hs);
        const cb = el("input", {type: "checkbox", "data-head": h, "aria-label": "head " + h}, lab);
        cb.checked = st.heads.has(h);
        cb.addEventListener("change", () => { cb.checked ? st.heads.add(h) : st.heads.delete(h); draw(); });
        el("span", {style: `color:${COLORS[h % COLORS.length]}`}, lab, String(h));
      }
      select(controls, "view", [["lines", "lines"], ["heatmap", "heatmap"]], st.view, v => { st.view = v; draw(); });
    }

    function drawNote() {
      const s = data.sentences[st.sentence];
      note.textContent = "";
      el("b", {}, note, s.title + ". ");
      note.appendChild(document.createTextNode(s.why + " "));
      el("br", {}, note);
      el("span", {class: "ae-src"}, note, "source: " + s.source);
      el("br", {}, note);
      el("span", {}, note, "model: " + s.translation);
      el("br", {}, note);
      el("span", {class: "ae-ref"}, note, "reference: " + s.reference);
    }

    function heads() { return [...st.heads].sort((a, b) => a - b); }

    function drawLines() {
      const W = weights(), qs = tokens("q"), ks = tokens("k"), n = Math.max(qs.length, ks.length);
      const width = 520, left = 130, right = width - 130, top = 26;
      const svg = el("svg", {class: "ae-lines", width, height: top + n * ROW + 6, role: "img",
                             "aria-label": `${KINDS[st.kind].label}, layer ${st.layer}: the query (left) attends to the key (right)`}, main);
      el("text", {x: left - 8, y: 14, "text-anchor": "end", class: "ae-axis"}, svg, "query");
      el("text", {x: right + 8, y: 14, class: "ae-axis"}, svg, "key (attended to)");
      const y = i => top + i * ROW + ROW / 2;
      const lines = el("g", {}, svg);
      for (const h of heads()) {
        W[h].forEach((row, q) => row.forEach((v, k) => {
          if (v === 0) return;
          const w = v / scale();
          el("line", {x1: left, y1: y(q), x2: right, y2: y(k), stroke: COLORS[h % COLORS.length], "stroke-width": 2,
                      "stroke-opacity": w, "data-head": h, "data-q": q, "data-k": k, "data-w": w, class: "ae-weight"}, lines);
        }));
      }
      const label = (toks, x, anchor, side) => toks.forEach((t, i) => {
        const e = el("text", {x, y: y(i) + 4, "text-anchor": anchor, class: "ae-token", "data-side": side, "data-index": i}, svg, t);
        e.addEventListener("mouseenter", () => focus(lines, side, i, e));
        e.addEventListener("mouseleave", () => focus(lines, null));
      });
      label(qs, left - 8, "end", "q");
      label(ks, right + 8, "start", "k");
    }

    function focus(group, side, i, label) {  // show only the lines of one token (hover), or all of them again
      st.focus = side === null ? null : {side, i};
      for (const ln of group.children) {
        const mine = side === null || +ln.dataset[side] === i;
        ln.style.display = mine ? "" : "none";
      }
      main.querySelectorAll(".ae-token").forEach(t => t.classList.toggle("ae-focus", t === label));
    }

    function drawHeatmaps() {
      const W = weights(), qs = tokens("q"), ks = tokens("k");
      const hs = heads(), cell = Math.max(6, Math.min(16, Math.floor(420 / ks.length)));
      const wrap = el("div", {class: "ae-heatmaps"}, main);
      for (const h of hs) {
        const lw = 84, th = 92;
        const svg = el("svg", {class: "ae-heatmap", width: Math.max(lw + ks.length * cell + 4, 230), height: th + qs.length * cell + 22,
                               role: "img", "aria-label": `head ${h}: queries (rows) attend to keys (columns)`}, wrap);
        el("text", {x: lw, y: 12, class: "ae-axis", fill: COLORS[h % COLORS.length]}, svg, `head ${h}: key (attended to) →`);
        el("text", {x: 2, y: th + qs.length * cell + 16, class: "ae-axis"}, svg, "query ↓");
        ks.forEach((t, k) => el("text", {x: 0, y: 0, class: "ae-small", transform: `translate(${lw + k * cell + cell * 0.7},${th - 3}) rotate(-60)`}, svg, t));
        const rows = el("g", {}, svg);
        qs.forEach((t, q) => {
          const lab = el("text", {x: lw - 4, y: th + q * cell + cell * 0.75, "text-anchor": "end", class: "ae-small ae-token",
                                  "data-side": "q", "data-index": q}, svg, t);
          const g = el("g", {"data-q": q}, rows);
          W[h][q].forEach((v, k) => {
            const w = v / scale();
            const r = el("rect", {x: lw + k * cell, y: th + q * cell, width: cell - 1, height: cell - 1, fill: COLORS[h % COLORS.length],
                                  "fill-opacity": Math.max(w, 0.02), "data-head": h, "data-q": q, "data-k": k, "data-w": w,
                                  class: "ae-weight"}, g);
            el("title", {}, r, `${t} → ${ks[k]}: ${w.toFixed(3)}`);
          });
          lab.addEventListener("mouseenter", () => rows.childNodes.forEach(r => r.style.opacity = +r.dataset.q === q ? 1 : 0.15));
          lab.addEventListener("mouseleave", () => rows.childNodes.forEach(r => r.style.opacity = 1));
        });
      }
    }

    function drawThumbs() {
      thumbs.textContent = "";
      thumbsTitle.textContent = `${KINDS[st.kind].label}, every layer and head (in each square, rows are queries and columns keys; click one to open it)`;
      const A = data.sentences[st.sentence].attention[st.kind];
      const grid = el("div", {class: "ae-grid", style: `grid-template-columns: 4em repeat(${data.n_heads}, auto)`}, thumbs);
      el("span", {}, grid);
      for (let h = 0; h < data.n_heads; h++) el("span", {class: "ae-small", style: `color:${COLORS[h % COLORS.length]}`}, grid, "head " + h);
      A.forEach((layer, l) => {
        el("span", {class: "ae-small"}, grid, "layer " + l);
        layer.forEach((m, h) => {
          const size = 64, c = el("canvas", {width: size, height: size, class: "ae-thumb", "data-layer": l, "data-head": h,
                                              title: `layer ${l}, head ${h}`, tabindex: 0}, grid);
          if (l === st.layer && st.heads.size === 1 && st.heads.has(h)) c.classList.add("ae-current");
          const ctx = c.getContext("2d"), cw = size / m[0].length, ch = size / m.length;
          ctx.fillStyle = "#fff"; ctx.fillRect(0, 0, size, size);
          m.forEach((row, q) => row.forEach((v, k) => {
            ctx.fillStyle = `rgba(31,60,140,${v / scale()})`;
            ctx.fillRect(k * cw, q * ch, Math.ceil(cw), Math.ceil(ch));
          }));
          const open = () => { st.layer = l; st.heads = new Set([h]); draw(); };
          c.addEventListener("click", open);
          c.addEventListener("keydown", e => { if (e.key === "Enter") open(); });
        });
      });
    }

    function draw() {
      drawControls(); drawNote();
      main.textContent = "";
      el("p", {class: "ae-caption"}, main,
         `${KINDS[st.kind].label}, layer ${st.layer}, heads ${heads().join(", ") || "none"}: the query attends to the key ` +
         `(line or square strength = weight; hover a token to see only its attention)`);
      st.view === "lines" ? drawLines() : drawHeatmaps();
      drawThumbs();
    }
    draw();
  }

  window.AttentionExplorer = {draw: Explorer};  // live.js draws a reader's own sentence with it

  function start() {
    document.querySelectorAll(".attention-explorer").forEach(root => {
      const data = (window.ATTENTION_DATA || {})[root.dataset.name];
      if (!data) { root.textContent = `attention data "${root.dataset.name}" not loaded`; return; }
      Explorer(root, data);
    });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start); else start();
})();
