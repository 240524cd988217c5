"""The exercises of Parts I and II: the answers live in nbs/_solutions.py, out of the reader's way, and each check tells a right
answer from a common wrong one.

An exercise is a function the reader writes (a cell whose body is `raise NotImplementedError`), a hidden cell that under
`nbdev_test` puts the reference answer in its place (`if use_reference(): from _solutions import NAME`), and a check cell
(`check("Exercise N", ...)`). The quick tests read the notebooks: every exercise has that shape and an answer in
nbs/_solutions.py, no notebook holds an answer, and every exercise has a wrong answer below. The slow test runs each page as
a reader would (no `IN_TEST`) and, at each check, tries the wrong answer (the check must say "not yet") and the reference
(it must say "right").
"""
from __future__ import annotations

import ast, json, os, re, sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
NBS = ROOT/'nbs'
sys.path.insert(0, str(ROOT/'tools'))
import book  # noqa: E402

# a common wrong answer to each exercise, which its check must refuse: {(page, function): source defining it}
WRONG = {
    ('01_attention', 'decoder_mask_by_hand'):  # causal only: padding keys stay open
        'def decoder_mask_by_hand(tokens, pad_idx): T = tokens.size(1); return torch.ones(T, T, dtype=torch.bool).triu(1).expand(len(tokens), T, T)',
    ('01_attention', 'score_variances'):  # divides by d_k, not its square root
        'def score_variances(d_k, n=20000):\n    s = (torch.randn(n, d_k) * torch.randn(n, d_k)).sum(-1)\n    return s.var().item(), (s / d_k).var().item()',
    ('01_attention', 'head_weights_by_hand'):  # forgets the 1/sqrt(d_k) scale
        'def head_weights_by_hand(mha, x, i):\n    r = slice(i * mha.d_k, (i + 1) * mha.d_k)\n'
        '    q, k = x @ mha.q_proj.weight[r].T + mha.q_proj.bias[r], x @ mha.k_proj.weight[r].T + mha.k_proj.bias[r]\n'
        '    return (q @ k.transpose(-2, -1)).softmax(-1)',
    ('02_layers', 'ffn_sublayer_by_hand'):  # a LayerNorm without its gain and bias
        'def ffn_sublayer_by_hand(x, ff, norm): return torch.nn.functional.layer_norm(x + ff(x), x.shape[-1:])',
    ('02_layers', 'layer_params'):  # forgets the biases
        'def layer_params(d_model, d_ff): a, f, n = 4 * d_model ** 2, 2 * d_model * d_ff, 2 * d_model; return a + f + 2 * n, 2 * a + f + 3 * n',
    ('03_embeddings', 'pe_by_hand'):  # exponent i / d_model instead of 2i / d_model
        'def pe_by_hand(pos, d_model): return torch.tensor([f(pos / 10000 ** (i / d_model)) for i in range(d_model // 2) for f in (math.sin, math.cos)])',
    ('03_embeddings', 'shift_by_rotation'):  # the cosine's angle-sum formula with the wrong sign
        'def shift_by_rotation(pe, k):\n    d = pe.numel(); w = torch.exp(-math.log(10000.0) * torch.arange(0, d, 2, dtype=pe.dtype) / d)\n'
        '    s, c = pe[0::2], pe[1::2]; out = torch.empty_like(pe)\n'
        '    out[0::2] = s * torch.cos(k * w) + c * torch.sin(k * w); out[1::2] = c * torch.cos(k * w) + s * torch.sin(k * w)\n    return out',
    ('03_embeddings', 'params_saved_by_tying'):  # forgets the projection's bias
        'def params_saved_by_tying(V, d_model): return 2 * V * d_model',
    ('04_model', 'count_by_formula'):  # a decoder layer without its cross-attention
        'def count_by_formula(V, D, F, N):\n    attn, ffn, norm = 4 * (D * D + D), D * F + F + F * D + D, 2 * D\n    return V * D + 2 * N * (attn + ffn + 2 * norm)',
    ('04_model', 'edit_source_row'):  # edits the generator, so an untied model changes too
        'def edit_source_row(model, token):\n    with torch.no_grad(): model.generator.weight[token] += 1\n    return model.generator.weight[token]',
    ('04_model', 'positions_affected'):  # believes the replaced position itself is unaffected
        'def positions_affected(model, src, tgt, t): return torch.arange(tgt.size(1)) > t',
    ('05_why_self_attention', 'table1_costs'):  # self-attention counted as Q K^T only
        'def table1_costs(n, d, k=3, r=16): return {"self-attention": n * n * d, "recurrent": 2 * n * d * d, "convolutional": k * n * d * d, "restricted": 2 * r * n * d}',
    ('05_why_self_attention', 'conv_path_layers'):  # n / k layers, as the O() suggests
        'def conv_path_layers(n, k): return math.ceil(n / k)',
    ('06_data', 'most_frequent_pair'):  # counts each pair once per word type, not per occurrence
        'def most_frequent_pair(words):\n    c = {}\n    for w in words:\n        for p in zip(w, w[1:]): c[p] = c.get(p, 0) + 1\n    return max(c, key=c.get)',
    ('06_data', 'merge_pair'):  # merges by string replacement, so ("xa", "b") merging ("a", "b") becomes ("xab",)
        'def merge_pair(words, pair): return {tuple(" ".join(w).replace(" ".join(pair), "".join(pair)).split()): n for w, n in words.items()}',
    ('06_data', 'fits'):  # forgets the EOS each side gets
        'def fits(src_ids, tgt_ids, max_len): return max(len(src_ids), len(tgt_ids)) <= max_len',
    ('07_batching', 'shift_by_hand'):  # tgt_in and tgt_out swapped
        'def shift_by_hand(tgt_ids, bos=1, eos=2): return [*tgt_ids, eos], [bos, *tgt_ids]',
    ('07_batching', 'padding_by_hand'):  # counts every position of the padded batch
        'def padding_by_hand(lengths): return max(lengths) * len(lengths)',
    ('07_batching', 'batches_by_hand'):  # a budget of real tokens, forgetting the padding
        'def batches_by_hand(lengths, max_tokens):\n    out, cur = [], []\n    for i in sorted(range(len(lengths)), key=lambda i: lengths[i]):\n'
        '        if cur and sum(lengths[j] for j in cur) + lengths[i] > max_tokens: out.append(cur); cur = []\n'
        '        cur.append(i)\n    return out + [cur] if cur else out',
    ('08_optim', 'lr_by_hand'):  # forgets the d_model^-0.5 factor
        'def lr_by_hand(step, d_model, warmup_steps): return min(step ** -0.5, step * warmup_steps ** -1.5)',
    ('08_optim', 'peak_by_hand'):  # the warmup branch's exponent at the peak
        'def peak_by_hand(d_model, warmup_steps): return warmup_steps, d_model ** -0.5 * warmup_steps ** -1.5',
    ('08_optim', 'first_adam_update'):  # no bias correction
        'def first_adam_update(grad, lr, betas=(0.9, 0.98), eps=1e-9):\n'
        '    m, v = (1 - betas[0]) * grad, (1 - betas[1]) * grad ** 2\n    return -lr * m / (v.sqrt() + eps)',
    ('09_loss', 'smooth_by_hand'):  # eps / (V - 1) to the other classes: another convention, not the one used here
        'def smooth_by_hand(y, V, eps): return [1 - eps if c == y else eps / (V - 1) for c in range(V)]',
    ('09_loss', 'loss_by_hand'):  # plain cross-entropy: right only at eps = 0
        'def loss_by_hand(logits, y, eps): return -logits.log_softmax(-1)[y]',
    ('09_loss', 'target_entropy'):  # only the target's term
        'def target_entropy(V, eps): p = 1 - eps + eps / V; return -p * math.log(p)',
    ('10_decode', 'beam_step'):  # ranks the tokens without the beams' scores so far
        'def beam_step(logp_sum, logp, K): top, idx = logp.flatten().topk(K); return top, idx // logp.size(1), idx % logp.size(1)',
    ('10_decode', 'alpha_where_longer_wins'):  # the ratio of log-probabilities upside down
        'def alpha_where_longer_wins(lp_short, n_short, lp_long, n_long): return math.log(lp_short / lp_long) / math.log((5 + n_long) / (5 + n_short))',
    ('10_decode', 'log_prob'):  # the mean log-probability per token, not the sum
        '@torch.no_grad()\ndef log_prob(model, src, tokens):\n    y = torch.tensor([[model.cfg.bos_idx, *tokens]])\n'
        '    logp = model.generator(model.decode(y[:, :-1], model.encode(src))).log_softmax(-1)\n    return logp[0].gather(1, y[0, 1:, None]).mean().item()',
    ('10a_bleu', 'clip_by_hand'):  # clips by the references' counts added up, not by the largest count in one reference
        'def clip_by_hand(hyp, refs, n):\n    g = lambda t: [tuple(t[i:i + n]) for i in range(len(t) - n + 1)]\n'
        '    return sum(min(g(hyp).count(x), sum(g(r).count(x) for r in refs)) for x in set(g(hyp))), len(g(hyp))',
    ('10a_bleu', 'corpus_brevity_penalty'):  # the average of the sentences' penalties
        'def corpus_brevity_penalty(lengths):\n    bp = lambda c, r: 1.0 if c > r else math.exp(1 - r / c)\n'
        '    return sum(bp(h, min(rs, key=lambda x: (abs(x - h), x))) for h, rs in lengths) / len(lengths)',
    ('10a_bleu', 'sentence_bleu_by_hand'):  # the corpus formula on one sentence: smoothed, but no effective order
        'def sentence_bleu_by_hand(hyp, ref): return bleu_by_hand([hyp], [ref], smooth="exp").score',
    ('11_copy_task', 'exact_match'):  # compares only the columns both have
        'def exact_match(out, tgt_out, pad=0): return (out[:, :tgt_out.size(1)] == tgt_out[:, :out.size(1)]).all(1).float().mean().item()',
    ('11_copy_task', 'diagonal_share'):  # the key after the query's own: the token just copied
        'def diagonal_share(maps): return [torch.as_tensor(a).diagonal(1).mean().item() for a in maps]',
    ('11_copy_task', 'recovery_steps'):  # the mean of the window, which one earlier spike inflates
        'def recovery_steps(loss, step, window=20):\n    before = sum(loss[step - 1 - window:step - 1]) / window\n'
        '    return next((s - step for s in range(step + 1, len(loss) + 1) if loss[s - 1] <= before), None)',
}

_re_ref = re.compile(r'\A#\| hide\nif use_reference\(\): from _solutions import (\w+)\b[^\n]*\Z')
_re_check = re.compile(r'^check\("([^"]+)"', re.M)


def _src(c) -> str: return ''.join(c['source'])


def exercise_pages() -> list[str]:
    return [s for part in book.numbered_parts()[:2] for s in part.pages]


def exercises(stem: str) -> list[dict]:
    """Each exercise of a page: its function's name, the indices of its three cells (reader's, hidden reference, check) and the
    check's title"""
    cells = json.loads((NBS/f'{stem}.ipynb').read_text(encoding='utf-8'))['cells']
    out = []
    for i, c in enumerate(cells):
        if c['cell_type'] != 'code' or 'use_reference()' not in _src(c): continue
        m = _re_ref.match(_src(c))
        assert m, f'{stem} cell {i}: a hidden reference cell must read `#| hide` / `if use_reference(): from _solutions import NAME`, got {_src(c)!r}'
        name = m.group(1)
        stub = _src(cells[i - 1])
        assert re.search(rf'^def {name}\(', stub, re.M) and 'raise NotImplementedError' in stub, \
            f'{stem} cell {i - 1}: the cell before the hidden reference must be the reader\'s `def {name}(...)`, unanswered'
        j = next((j for j in range(i + 1, len(cells)) if _re_check.search(_src(cells[j]))), None)
        assert j is not None, f'{stem}: no check cell after the reference of {name}'
        assert name in _src(cells[j]), f'{stem} cell {j}: the check after `{name}` does not use it'
        out.append(dict(name=name, stub=i - 1, ref=i, check=j, title=_re_check.search(_src(cells[j])).group(1)))
    return out


def solution_names() -> list[str]:
    tree = ast.parse((NBS/'_solutions.py').read_text(encoding='utf-8'))
    return [n.name for n in tree.body if isinstance(n, ast.FunctionDef)]


def test_every_exercise_has_its_answer_in_solutions_and_not_in_the_notebook():
    found = {(s, e['name']) for s in exercise_pages() for e in exercises(s)}
    assert len(found) >= 2 * len(exercise_pages())
    names = solution_names()
    dup = {n for n in names if names.count(n) > 1}
    assert not dup, f'nbs/_solutions.py defines these twice (the second would answer both exercises): {sorted(dup)}'
    assert {n for _, n in found} == set(names), (f'exercises without an answer in nbs/_solutions.py: {sorted({n for _, n in found} - set(names))}; '
                                                  f'answers to no exercise: {sorted(set(names) - {n for _, n in found})}')
    for stem in exercise_pages():   # a reader who opens the notebook sees the exercise and its check, never the answer
        for i, c in enumerate(json.loads((NBS/f'{stem}.ipynb').read_text(encoding='utf-8'))['cells']):
            if c['cell_type'] != 'code': continue
            s = _src(c)
            if 'NotImplementedError' in s: continue
            defined = re.findall(r'^\s*def (\w+)\(', s, re.M)
            assert not set(defined) & set(names), f'{stem} cell {i} defines {set(defined) & set(names)}, an answer: it belongs in nbs/_solutions.py'


def test_every_exercise_has_a_wrong_answer_to_refuse():
    found = {(s, e['name']) for s in exercise_pages() for e in exercises(s)}
    assert set(WRONG) == found, f'exercises without a wrong answer here: {sorted(found - set(WRONG))}; stale entries: {sorted(set(WRONG) - found)}'
    titles = {s: [e['title'] for e in exercises(s)] for s in exercise_pages()}
    for s, t in titles.items(): assert t == [f'Exercise {i}' for i in range(1, len(t) + 1)], f'{s}: exercises numbered {t}'


_SKIP = {'slow', 'cuda', 'multigpu', 'rerun'}   # as nbdev_test without --flags


@pytest.mark.slow  # runs the twelve pages of Parts I-II (about two minutes)
@pytest.mark.parametrize('stem', exercise_pages())
def test_checks_refuse_a_wrong_answer_and_accept_the_reference(stem, monkeypatch):
    "Each page runs as a reader runs it; at each check, a wrong answer is refused and the reference is accepted"
    from execnb.nbio import read_nb
    from execnb.shell import CaptureShell
    from nbdev.process import extract_directives
    monkeypatch.delenv('IN_TEST', raising=False)   # a reader's run: check() prints instead of raising
    monkeypatch.chdir(NBS); monkeypatch.syspath_prepend(str(NBS))
    monkeypatch.setenv('OMP_NUM_THREADS', os.environ.get('OMP_NUM_THREADS', '1'))
    path = NBS/f'{stem}.ipynb'
    ex = {e['check']: e for e in exercises(stem)}
    nb = read_nb(path)
    sh = CaptureShell(path)
    seen = []

    def stdout(outs):
        if sh.exc: raise AssertionError(f'{stem}: {type(sh.exc).__name__}: {sh.exc}')
        return ''.join(''.join(o.get('text', '')) for o in outs if o.get('output_type') == 'stream')

    def skip(cell):
        if cell.cell_type != 'code' or 'nbdev_export(' in cell.source: return True
        d = extract_directives(cell, remove=False) or {}
        return bool(_SKIP & d.keys()) or (d.get('eval:') or [''])[0].lower() == 'false'

    def after(cell):
        e = ex.get(cell.idx_)
        if e is None: return
        t = e['title']
        if 'is not available' in (out := stdout(cell.outputs or [])) and out.startswith('skipped: '):   # skip_rest_without: no corpus here
            pytest.skip(f'{stem}: {out.strip()}')
        assert f'✗ {t}: not answered yet' in out, f'{stem} {t}: the unanswered exercise does not say so'
        stdout(sh.run(WRONG[(stem, e['name'])]))
        got = stdout(sh.run(cell.source))
        assert f'✗ {t}: not yet' in got, f'{stem} {t}: the check accepts the wrong answer in tests/test_exercises.py: {got!r}'
        stdout(sh.run(f'from _solutions import {e["name"]}'))
        got = stdout(sh.run(cell.source))
        assert f'✓ {t}: right' in got, f'{stem} {t}: the check refuses the reference answer of nbs/_solutions.py: {got!r}'
        seen.append(e['name'])

    sh.run_all(nb, exc_stop=True, preproc=skip, postproc=after)
    assert seen == [e['name'] for e in exercises(stem)], f'{stem}: checked {seen}'
