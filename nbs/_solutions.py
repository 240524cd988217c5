"""Reference answers to the exercises of the book's pages (Parts I and II), one section per page.

Not part of the package, and not for reading before trying: each page's exercise cell stays unanswered for the reader, and
only under `nbdev_test` (which sets `IN_TEST`) does the page's hidden cell `if use_reference(): from _solutions import NAME`
put the answer here in place of the reader's, so that every test run checks each answer against its check, and each check
against a right answer. A function here has the name of the function the exercise asks for.
"""
import math

import torch

# ---------------- 01_attention
# Exercise 1
def decoder_mask_by_hand(tokens, pad_idx):
    T = tokens.size(1)
    later = torch.arange(T)[None, :] > torch.arange(T)[:, None]  # (T, T): key j after query i
    return later | (tokens == pad_idx)[:, None, :]  # (B, T, T): a padding key is blocked on every row

# Exercise 2
def score_variances(d_k, n=20000):
    q, k = torch.randn(n, d_k), torch.randn(n, d_k)
    s = (q * k).sum(-1)  # (n,): one dot product per pair
    return s.var().item(), (s / math.sqrt(d_k)).var().item()

# Exercise 3
def head_weights_by_hand(mha, x, i):
    rows = slice(i * mha.d_k, (i + 1) * mha.d_k)  # head i's rows of each projection
    q = x @ mha.q_proj.weight[rows].T + mha.q_proj.bias[rows]  # (B, T, Dh)
    k = x @ mha.k_proj.weight[rows].T + mha.k_proj.bias[rows]  # (B, T, Dh)
    return (q @ k.transpose(-2, -1) / math.sqrt(mha.d_k)).softmax(-1)  # (B, T, T)


# ---------------- 02_layers
# Exercise 1
def ffn_sublayer_by_hand(x, ff, norm):
    h = x + ff(x)  # (B, T, D): the residual sum
    mu, var = h.mean(-1, keepdim=True), h.var(-1, unbiased=False, keepdim=True)  # (B, T, 1)
    return (h - mu) / torch.sqrt(var + 1e-5) * norm.weight + norm.bias  # (B, T, D)

# Exercise 2
def layer_params(d_model, d_ff):
    attn = 4 * (d_model * d_model + d_model)  # W^Q, W^K, W^V, W^O with biases
    ffn = d_model * d_ff + d_ff + d_ff * d_model + d_model  # W1, b1, W2, b2
    norm = 2 * d_model  # gain and bias
    return attn + ffn + 2 * norm, 2 * attn + ffn + 3 * norm


# ---------------- 03_embeddings
# Exercise 1
def pe_by_hand(pos, d_model):
    out = []
    for i in range(d_model // 2):  # dimensions 2i and 2i+1 share one frequency
        angle = pos / 10000 ** (2 * i / d_model)
        out += [math.sin(angle), math.cos(angle)]
    return torch.tensor(out)

# Exercise 2
def shift_by_rotation(pe, k):
    d = pe.numel()
    w = torch.exp(-math.log(10000.0) * torch.arange(0, d, 2, dtype=pe.dtype) / d)  # (D/2,) the frequencies
    s, c = pe[0::2], pe[1::2]  # sin(pos w), cos(pos w)
    out = torch.empty_like(pe)
    out[0::2] = s * torch.cos(k * w) + c * torch.sin(k * w)  # sin((pos + k) w)
    out[1::2] = c * torch.cos(k * w) - s * torch.sin(k * w)  # cos((pos + k) w)
    return out

# Exercise 3
def params_saved_by_tying(V, d_model): return 2 * V * d_model + V  # two of the three (V, D) matrices, and the bias


# ---------------- 04_model
# Exercise 1
def count_by_formula(V, D, F, N):
    attn, ffn, norm = 4 * (D * D + D), D * F + F + F * D + D, 2 * D
    return V * D + N * (attn + ffn + 2 * norm) + N * (2 * attn + ffn + 3 * norm)

# Exercise 2
def edit_source_row(model, token):
    with torch.no_grad(): model.src_embed.weight[token] += 1
    return model.generator.weight[token]

# Exercise 3
def positions_affected(model, src, tgt, t):
    tgt2 = tgt.clone(); tgt2[:, t] = 3 if tgt[0, t] != 3 else 4
    return (model(src, tgt) - model(src, tgt2)).abs().amax(dim=(0, 2)) > 1e-6  # (T,)


# ---------------- 05_why_self_attention
# Exercise 1
def table1_costs(n, d, k=3, r=16):
    return {"self-attention": 2 * n * n * d,  # (n x d)(d x n) scores, then (n x n)(n x d) weighted sum
            "recurrent": 2 * n * d * d,  # W x_t and U h_{t-1}: two (d x d) by d products at each of n steps
            "convolutional": k * n * d * d,  # k taps of a (d x d) matrix at each position
            "restricted": 2 * r * n * d}  # each query scores r keys and sums r values

# Exercise 2
def conv_path_layers(n, k): return math.ceil((n - 1) / ((k - 1) // 2))  # O(n/k)


# ---------------- 06_data
# Exercise 1
def most_frequent_pair(words):
    counts = {}
    for w, n in words.items():
        for pair in zip(w, w[1:]): counts[pair] = counts.get(pair, 0) + n
    return max(counts, key=counts.get)

# Exercise 2
def merge_pair(words, pair):
    out = {}
    for w, n in words.items():
        s, i = [], 0
        while i < len(w):
            if tuple(w[i:i + 2]) == tuple(pair): s.append(w[i] + w[i + 1]); i += 2
            else: s.append(w[i]); i += 1
        out[tuple(s)] = n
    return out

# Exercise 3
def fits(src_ids, tgt_ids, max_len): return max(len(src_ids), len(tgt_ids)) + 1 <= max_len


# ---------------- 07_batching
# Exercise 1
def shift_by_hand(tgt_ids, bos=1, eos=2): return [bos, *tgt_ids], [*tgt_ids, eos]

# Exercise 2
def padding_by_hand(lengths): return max(lengths) * len(lengths) - sum(lengths)

# Exercise 3
def batches_by_hand(lengths, max_tokens):
    batches, cur, longest = [], [], 0
    for i in sorted(range(len(lengths)), key=lambda i: lengths[i]):
        if cur and (len(cur) + 1) * max(longest, lengths[i]) > max_tokens: batches.append(cur); cur, longest = [], 0
        cur.append(i); longest = max(longest, lengths[i])
    return batches + [cur] if cur else batches


# ---------------- 08_optim
# Exercise 1
def lr_by_hand(step, d_model, warmup_steps): return d_model ** -0.5 * min(step ** -0.5, step * warmup_steps ** -1.5)

# Exercise 2
def peak_by_hand(d_model, warmup_steps): return warmup_steps, d_model ** -0.5 * warmup_steps ** -0.5

# Exercise 3
def first_adam_update(grad, lr, betas=(0.9, 0.98), eps=1e-9):
    m, v = (1 - betas[0]) * grad, (1 - betas[1]) * grad ** 2
    return -lr * (m / (1 - betas[0])) / ((v / (1 - betas[1])).sqrt() + eps)


# ---------------- 09_loss
# Exercise 1
def smooth_by_hand(y, V, eps): return [(1 - eps) * (c == y) + eps / V for c in range(V)]

# Exercise 2
def loss_by_hand(logits, y, eps): return -(torch.tensor(smooth_by_hand(y, len(logits), eps)) * logits.log_softmax(-1)).sum()

# Exercise 3
def target_entropy(V, eps):
    top, rest = 1 - eps + eps / V, eps / V
    return -top * math.log(top) - (V - 1) * rest * math.log(rest)


# ---------------- 10_decode
# Exercise 1
def beam_step(logp_sum, logp, K):
    top, idx = (logp_sum[:, None] + logp).flatten().topk(K)  # (K,) over all k * V extensions
    return top, idx // logp.size(1), idx % logp.size(1)

# Exercise 2
def alpha_where_longer_wins(lp_short, n_short, lp_long, n_long):
    return math.log(lp_long / lp_short) / math.log((5 + n_long) / (5 + n_short))  # lp_long / lp(n_long) = lp_short / lp(n_short)

# Exercise 3
@torch.no_grad()
def log_prob(model, src, tokens):
    y = torch.tensor([[model.cfg.bos_idx, *tokens]])  # (1, T+1)
    logp = model.generator(model.decode(y[:, :-1], model.encode(src))).log_softmax(-1)  # (1, T, V)
    return logp[0].gather(1, y[0, 1:, None]).sum().item()


# ---------------- 10a_bleu
# Exercise 1
def clip_by_hand(hyp, refs, n):
    grams = lambda toks: [tuple(toks[i:i + n]) for i in range(len(toks) - n + 1)]
    clipped = sum(min(grams(hyp).count(g), max(grams(r).count(g) for r in refs)) for g in set(grams(hyp)))  # the largest count in one reference
    return clipped, len(grams(hyp))

# Exercise 2
def corpus_brevity_penalty(lengths):
    c = sum(h for h, _ in lengths)
    r = sum(min(rs, key=lambda x: (abs(x - h), x)) for h, rs in lengths)  # best match lengths, the shorter on a tie
    return 1.0 if c > r else math.exp(1 - r / c)  # once, for the whole corpus

# Exercise 3
def sentence_bleu_by_hand(hyp, ref):
    from annotated_transformer.training.bleu import brevity_penalty, clipped_matches, modified_precisions
    h, r = hyp.split(), ref.split()
    counts = [clipped_matches(h, [r], n) for n in range(1, 5)]
    counts = [(m, t) for m, t in counts if t > 0]  # effective order: only the orders the hypothesis has n-grams of
    p = modified_precisions([m for m, _ in counts], [t for _, t in counts], smooth="exp")
    if not any(m for m, _ in counts): return 0.0
    return 100 * brevity_penalty(len(h), len(r)) * math.exp(sum(map(math.log, p)) / len(p))


# ---------------- 11_copy_task
# Exercise 1
def exact_match(out, tgt_out, pad=0):
    T = max(out.size(1), tgt_out.size(1))
    widen = lambda y: torch.nn.functional.pad(y, (0, T - y.size(1)), value=pad)  # (n, T)
    return (widen(out) == widen(tgt_out)).all(1).float().mean().item()

# Exercise 2
def diagonal_share(maps): return [torch.as_tensor(a).diagonal().mean().item() for a in maps]  # a[i, i], averaged over the queries i

# Exercise 3
def recovery_steps(loss, step, window=20):
    before = sorted(loss[step - 1 - window:step - 1])[window // 2]  # the median of the window losses before the jump
    return next((s - step for s in range(step + 1, len(loss) + 1) if loss[s - 1] <= before), None)
