"""The shipped translator exported to ONNX (nbs/38a_onnx_export.ipynb) computes what the PyTorch model computes: the encoder's
outputs and one decoding step on random batches, every step of a prefix decoded through the key/value cache against the whole
prefix decoded at once (attention weights included), and greedy translations of twenty sentences; the weights are stored in
fp16 and the tied embedding once."""
import hashlib, json
from dataclasses import replace
import numpy as np
import pytest, torch

onnx = pytest.importorskip("onnx")
pytest.importorskip("onnxruntime")
pytest.importorskip("onnxscript")

from annotated_transformer.engine.checkpoint import make_checkpoint
from annotated_transformer.engine.shipped_models import write_shipped
from annotated_transformer.engine.config import TransformerConfig
from annotated_transformer.training.data import SubwordTokenizer
from annotated_transformer.training.decode import greedy_decode
from annotated_transformer.translation.inference import encode_sources
from annotated_transformer.architecture.model import make_model
from annotated_transformer.before.background import RNNConfig, make_rnn
from annotated_transformer.engine.shipped_models import pretrained, shipped_path
from annotated_transformer.bench.onnx_export import export_translator, onnx_sessions, onnx_greedy_decode

TOL = 1e-3

# Multi30k-like German sentences (written for this test: image descriptions in the corpus's style)
SENTENCES = """Zwei Hunde spielen im Schnee.
Ein Mann fährt mit dem Fahrrad eine Straße entlang.
Eine Frau in einem roten Kleid singt auf einer Bühne.
Kinder spielen Fußball im Park.
Ein kleines Mädchen sitzt auf einer Bank und isst ein Eis.
Ein Mann mit einem Hut verkauft Obst auf einem Markt.
Zwei Männer arbeiten auf einem Dach.
Eine Gruppe von Menschen wartet an einer Bushaltestelle.
Ein Junge springt in einen See.
Ein brauner Hund läuft über eine grüne Wiese.
Eine ältere Frau liest eine Zeitung.
Ein Mann spielt Gitarre auf der Straße.
Drei Kinder klettern auf einen Baum.
Ein Koch bereitet in einer Küche Essen zu.
Eine Frau fotografiert ein Gebäude.
Ein Radfahrer fährt einen Berg hinauf.
Zwei Mädchen lachen an einem Strand.
Ein Mann in einem blauen Hemd telefoniert.
Menschen gehen bei Nacht eine belebte Straße entlang.
Ein Hund fängt einen Ball im Wasser.""".splitlines()


@pytest.fixture(scope="module")
def exported(tmp_path_factory):
    "The German-English model exported once for this module, its PyTorch model and tokenizer, and onnxruntime sessions of the export."
    d = export_translator("multi30k-de-en", tmp_path_factory.mktemp("onnx") / "multi30k-de-en")
    tr = pretrained("multi30k-de-en")
    return d, tr.model, tr.tokenizer, onnx_sessions(d)


def _random_src(g, model, S):
    src = torch.randint(4, model.cfg.src_vocab_size, (1, S), generator=g)  # (1, S)
    src[0, -1] = model.cfg.eos_idx
    return src


def _diff(a, b): return float(np.abs(np.asarray(a) - (b.numpy() if torch.is_tensor(b) else b)).max())


@torch.no_grad()
def _steps_against_full_prefix(model, encoder, decoder, src, ys):
    """Decode the rows ys (N, T), BOS first, through the graphs' cache from an empty one; at every step compare with the whole
    prefix decoded by PyTorch without a cache. Returns the largest difference of each output over all steps."""
    N, T = ys.shape
    memory = model.encode(src)  # (1, S, D)
    _, cross_k, cross_v, _ = encoder.run(None, {"src": src.numpy()})
    L, H, Dh = model.cfg.n_layers, model.cfg.n_heads, model.cfg.head_dim
    self_k = self_v = np.zeros((L, N, H, 0, Dh), np.float32)
    worst = dict(logprobs=0.0, self_k=0.0, self_attn=0.0, cross_attn=0.0)
    for t in range(T):
        logprobs, self_k, self_v, self_attn, cross_attn = decoder.run(None, dict(
            tokens=ys[:, t:t + 1].numpy(), step=np.array([t]), self_k=self_k, self_v=self_v, cross_k=cross_k, cross_v=cross_v))
        assert self_k.shape == (L, N, H, t + 1, Dh) and self_attn.shape == (L, N, H, 1, t + 1) and cross_attn.shape == (L, N, H, 1, src.size(1))
        h, w = model.decode(ys[:, :t + 1], memory.expand(N, -1, -1), need_weights=True)  # (N, t+1, D), per layer (N, H, t+1, t+1) and (N, H, t+1, S)
        keys = torch.stack([l.self_attn.split_heads(l.self_attn.k_proj(x)) for l, x in zip(model.decoder.layers, _layer_inputs(model, ys[:, :t + 1], memory.expand(N, -1, -1)))])
        worst["logprobs"] = max(worst["logprobs"], _diff(logprobs, model.generator(h[:, -1]).log_softmax(-1)))
        worst["self_k"] = max(worst["self_k"], _diff(self_k, keys))
        worst["self_attn"] = max(worst["self_attn"], _diff(self_attn, torch.stack([x["self"][:, :, -1:] for x in w])))
        worst["cross_attn"] = max(worst["cross_attn"], _diff(cross_attn, torch.stack([x["cross"][:, :, -1:] for x in w])))
    return worst


def _layer_inputs(model, ys, memory):
    "What each decoder layer's self-attention projects its keys from: the normalized input in pre-norm mode (PyTorch, no cache)."
    x, out = model.tgt_pos(model.tgt_embed(ys)), []
    for layer in model.decoder.layers:
        out.append(layer.pre(x, layer.norm1))
        x = layer(x, memory)
    return out


def test_files_meta_and_storage(exported):
    "meta.json lists every file with its sha256; weights are fp16 but the positional table; the tied embedding is stored once, in shared.bin."
    d, model, _, _ = exported
    meta = json.loads((d / "meta.json").read_text())
    assert sorted(p.name for p in d.iterdir()) == sorted([*meta["files"], "meta.json"]) == sorted(
        ["encoder.onnx", "decoder.onnx", "shared.bin", "spm.model", "meta.json"])
    for f, rec in meta["files"].items():
        b = (d / f).read_bytes()
        assert (len(b), hashlib.sha256(b).hexdigest()) == (rec["bytes"], rec["sha256"]), f
    assert meta["source"]["sha256"] == hashlib.sha256((shipped_path("multi30k-de-en") / "model.safetensors").read_bytes()).hexdigest()
    assert (d / "spm.model").read_bytes() == (shipped_path("multi30k-de-en") / "spm.model").read_bytes()
    assert (meta["n_layers"], meta["n_heads"], meta["head_dim"], meta["d_model"], meta["vocab_size"]) == (3, 4, 64, 256, 8000)
    assert (meta["bos_id"], meta["eos_id"], meta["pad_id"], meta["beam_size"], meta["alpha"], meta["direction"]) == (1, 2, 0, 4, 0.6, "de-en")
    V, D = model.cfg.tgt_vocab_size, model.cfg.d_model
    n_weights = sum(p.numel() for p in model.parameters())
    for g in ("encoder", "decoder"):
        inits = onnx.load(d / f"{g}.onnx", load_external_data=False).graph.initializer
        big = [t for t in inits if np.prod(t.dims) >= 1024]
        assert {t.data_type for t in big if tuple(t.dims) != (model.cfg.max_len, D)} == {onnx.TensorProto.FLOAT16}
        emb = [t for t in inits if tuple(t.dims) == (V, D)]
        assert len(emb) == 1 and emb[0].data_location == onnx.TensorProto.EXTERNAL and emb[0].external_data[0].value == "shared.bin"
    total = sum(meta["files"][f]["bytes"] for f in ("encoder.onnx", "decoder.onnx", "shared.bin"))
    assert total < 2 * n_weights + 4 * model.cfg.max_len * D + 600_000  # each weight once in 2 bytes, the table in fp32, the graphs' structure


def test_encoder_matches_pytorch(exported):
    d, model, _, (encoder, _, _) = exported
    g = torch.Generator().manual_seed(0)
    for S in (1, 7, 31):
        src = _random_src(g, model, S)
        memory, cross_k, cross_v, enc_attn = encoder.run(None, {"src": src.numpy()})
        with torch.no_grad():
            ref, w = model.encode(src, need_weights=True)
            kv = [l.cross_attn.project_kv(ref, ref, None, static_kv=True) for l in model.decoder.layers]
        assert _diff(memory, ref) < TOL and _diff(enc_attn, torch.stack(w)) < TOL
        assert _diff(cross_k, torch.stack([k for k, _ in kv])) < TOL and _diff(cross_v, torch.stack([v for _, v in kv])) < TOL


def test_decoding_through_the_cache_matches_the_whole_prefix(exported):
    "From an empty cache (t = 0), N random rows step by step: logprobs, cached keys and attention weights equal the no-cache forward."
    d, model, _, (encoder, decoder, _) = exported
    g = torch.Generator().manual_seed(1)
    for S, N, T in ((12, 4, 9), (3, 1, 5)):
        src = _random_src(g, model, S)
        ys = torch.randint(4, model.cfg.tgt_vocab_size, (N, T), generator=g)
        ys[:, 0] = model.cfg.bos_idx
        worst = _steps_against_full_prefix(model, encoder, decoder, src, ys)
        assert max(worst.values()) < TOL, worst


def test_greedy_translations_match(exported):
    d, model, tok, (encoder, decoder, meta) = exported
    srcs = encode_sources(tok, SENTENCES, model.cfg.max_len)
    ours = [onnx_greedy_decode(encoder, decoder, meta, s) for s in srcs]
    ref = [greedy_decode(model, torch.tensor([s]))[0].tolist() for s in srcs]
    assert ours == ref
    assert len(set(map(tuple, ours))) == len(SENTENCES)  # twenty different translations, not one repeated


def test_refuses_to_overwrite_and_names_unknown_models(exported, tmp_path):
    d = exported[0]
    with pytest.raises(FileExistsError, match="not empty; pass force=True"): export_translator("multi30k-de-en", d)
    with pytest.raises(ValueError, match="no such shipped model"): export_translator("no-such-model", tmp_path / "x")
    assert not (tmp_path / "x").exists()
    tok = SubwordTokenizer((shipped_path("multi30k-de-en") / "spm.model").read_bytes())
    rnn = make_rnn(RNNConfig(src_vocab_size=tok.vocab_size, tgt_vocab_size=tok.vocab_size, d_model=16, n_layers=1))
    write_shipped(make_checkpoint(rnn, tokenizer=tok), tmp_path / "rnn", provenance={})
    with pytest.raises(TypeError, match="recurrent translator; only a Transformer translator exports"):
        export_translator(tmp_path / "rnn", tmp_path / "rnn-onnx")
    assert not (tmp_path / "rnn-onnx").exists()


def test_other_configurations(tmp_path):
    """The paper's post-norm, untied embeddings (nothing shared, a generator bias), learned positions and d_k other than D / H
    export too, and step through the cache as the model decodes (an untrained tiny model, weights moved off their initial values)."""
    lines = ["a b c d", "b c d e", "c d e f"] * 20
    tok = SubwordTokenizer.train(lines, vocab_size=16, byte_fallback=False)
    cfg = replace(TransformerConfig.tiny(src_vocab_size=16, tgt_vocab_size=16), tie_embeddings=False, positional="learned", d_k=8)
    torch.manual_seed(0)
    model = make_model(cfg).eval()
    with torch.no_grad():
        for p in model.parameters(): p += 0.05 * torch.randn_like(p)
    write_shipped(make_checkpoint(model, tokenizer=tok), tmp_path / "tiny", provenance={}, dtype=torch.float32)
    d = export_translator(tmp_path / "tiny", tmp_path / "onnx", fp16=False)
    encoder, decoder, meta = onnx_sessions(d)
    assert "shared.bin" not in meta["files"] and meta["head_dim"] == 8 and meta["direction"] is None
    g = torch.Generator().manual_seed(2)
    src = _random_src(g, model, 6)
    ys = torch.randint(4, 16, (3, 7), generator=g); ys[:, 0] = cfg.bos_idx
    worst = _steps_against_full_prefix(model, encoder, decoder, src, ys)
    assert max(worst.values()) < 1e-4, worst
