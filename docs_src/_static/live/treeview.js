/* A constituency tree: read from its bracketed form, "(S (NP (DT The) (NN cat)) (VP (VBD sat)))", and drawn as
 * SVG with the words along the bottom, each label above the words it spans.
 */

/** Parse a bracketed tree into {label, children} nodes; a leaf is {label: tag, word}. Throws on unbalanced input. */
export function parseBracketed(s) {
  const toks = s.match(/\(|\)|[^\s()]+/g) || [];
  let i = 0;
  function node() {
    if (toks[i] !== '(') throw new SyntaxError(`bracketed tree: expected "(" at token ${i}, found ${toks[i] ?? 'the end'}`);
    i++;
    let label = '';
    if (toks[i] !== '(' && toks[i] !== ')') label = toks[i++];
    const children = [];
    while (toks[i] === '(') children.push(node());
    if (toks[i] !== '(' && toks[i] !== ')' && toks[i] !== undefined && !children.length) {
      const word = toks[i++];
      if (toks[i++] !== ')') throw new SyntaxError('bracketed tree: a leaf has more than one word');
      return {label, word};
    }
    if (toks[i++] !== ')') throw new SyntaxError('bracketed tree: unbalanced brackets');
    return {label, children};
  }
  const root = node();
  if (i !== toks.length) throw new SyntaxError('bracketed tree: text after the tree');
  return root.label === '' && root.children?.length === 1 ? root.children[0] : root;  // PTB's outer ( ... )
}

/** Lay out: each leaf a column, each node centred over its children; returns {nodes, edges, width, depth}. */
export function layout(tree) {
  const nodes = [], edges = [];
  let col = 0, depth = 0;
  function walk(n, d) {
    depth = Math.max(depth, d);
    if (n.word !== undefined) {
      const me = {label: n.label, word: n.word, x: col++, y: d};
      nodes.push(me);
      return me;
    }
    const kids = n.children.map(c => walk(c, d + 1));
    const me = {label: n.label, x: (kids[0].x + kids[kids.length - 1].x) / 2, y: d};
    nodes.push(me);
    kids.forEach(k => edges.push([me, k]));
    return me;
  }
  walk(tree, 0);
  return {nodes, edges, width: col, depth};
}

const SVG = 'http://www.w3.org/2000/svg';

/** Draw `tree` into `parent` (an element); leaves' words sit on one baseline under their tags. */
export function drawTree(parent, tree) {
  const {nodes, edges, width, depth} = layout(tree);
  const colW = 64, rowH = 38, pad = 16, wordY = pad + (depth + 1) * rowH;
  const X = x => pad + colW / 2 + x * colW, Y = y => pad + y * rowH;
  const svg = document.createElementNS(SVG, 'svg');
  svg.setAttribute('width', pad * 2 + width * colW);
  svg.setAttribute('height', wordY + 24);
  svg.setAttribute('role', 'img');
  svg.setAttribute('aria-label', 'the parse tree');
  svg.setAttribute('class', 'live-tree-svg');
  const add = (tag, attrs, text) => {
    const e = document.createElementNS(SVG, tag);
    for (const [k, v] of Object.entries(attrs)) e.setAttribute(k, v);
    if (text !== undefined) e.textContent = text;
    svg.appendChild(e);
    return e;
  };
  for (const [a, b] of edges) add('line', {x1: X(a.x), y1: Y(a.y) + 6, x2: X(b.x), y2: Y(b.y) - 12, class: 'live-tree-edge'});
  for (const n of nodes) {
    add('text', {x: X(n.x), y: Y(n.y), 'text-anchor': 'middle', class: n.word !== undefined ? 'live-tree-tag' : 'live-tree-label'}, n.label);
    if (n.word !== undefined) {
      add('line', {x1: X(n.x), y1: Y(n.y) + 6, x2: X(n.x), y2: wordY - 14, class: 'live-tree-edge live-tree-dashed'});
      add('text', {x: X(n.x), y: wordY, 'text-anchor': 'middle', class: 'live-tree-word'}, n.word);
    }
  }
  parent.appendChild(svg);
  return svg;
}
