"Export to CTranslate2 (32d_ctranslate2): a failed export leaves nothing behind; checkpoints that are not translators are refused."
import os, pytest, torch
from pathlib import Path
ct2_mod = pytest.importorskip("ctranslate2")
from annotated_transformer.bench import ctranslate2 as ct2
from annotated_transformer.engine.config import TransformerConfig
from annotated_transformer.architecture.model import make_model
from annotated_transformer.engine.checkpoint import save_model, CheckpointError
from annotated_transformer.training.data import SubwordTokenizer

@pytest.fixture(scope="module")
def ckpt(tmp_path_factory):
    d = tmp_path_factory.mktemp("ct2")
    tok = SubwordTokenizer.train(["a b c d e f g h i j"] * 50 + ["j i h g f e d c b a"] * 50, vocab_size=20, byte_fallback=False)
    torch.manual_seed(0)
    model = make_model(TransformerConfig.tiny(src_vocab_size=tok.vocab_size, tgt_vocab_size=tok.vocab_size))
    return save_model(model, d / "checkpoint.pt", tokenizer=tok.state_dict())

def test_a_failed_export_leaves_nothing(ckpt, tmp_path, monkeypatch):
    out = tmp_path / "model"
    def broken(model, tok): raise RuntimeError("interrupted")
    monkeypatch.setattr(ct2, "ct2_spec", broken)
    with pytest.raises(RuntimeError, match="interrupted"): ct2.export_ctranslate2(ckpt, out)
    assert list(tmp_path.iterdir()) == []  # neither the model directory nor a temporary one

def test_force_replaces_a_model_only_when_complete(ckpt, tmp_path, monkeypatch):
    out = ct2.export_ctranslate2(ckpt, tmp_path / "model")
    before = (out / "model.bin").read_bytes()
    monkeypatch.setattr(ct2, "ct2_spec", lambda m, t: (_ for _ in ()).throw(RuntimeError("interrupted")))
    with pytest.raises(RuntimeError): ct2.export_ctranslate2(ckpt, out, force=True)
    assert (out / "model.bin").read_bytes() == before  # the old model is still whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["model"]

def test_a_file_in_the_way_is_named(ckpt, tmp_path):
    (tmp_path / "model").write_text("x")
    with pytest.raises(FileExistsError, match="not a directory"): ct2.export_ctranslate2(ckpt, tmp_path / "model")

def test_a_checkpoint_without_tokenizer_is_refused(tmp_path):
    torch.manual_seed(0)
    p = save_model(make_model(TransformerConfig.tiny(src_vocab_size=20, tgt_vocab_size=20)), tmp_path / "ids.pt")
    with pytest.raises(CheckpointError, match="no tokenizer inside the checkpoint"): ct2.export_ctranslate2(p, tmp_path / "out")
    assert not (tmp_path / "out").exists()


def test_a_shipped_model_exports_and_translates_as_ours(tmp_path):
    "export_ctranslate2 takes a shipped model's directory (pretrained/NAME) as it takes a checkpoint; CTranslate2 then translates as we do."
    shipped = Path(__file__).resolve().parents[1] / "pretrained" / "multi30k-de-en"
    if not (shipped / "config.json").is_file(): pytest.skip(f"{shipped}: not shipped here")
    from annotated_transformer.engine.shipped_models import pretrained
    out = ct2.export_ctranslate2(shipped, tmp_path / "model")
    lines = ["Zwei Hunde spielen im Schnee.", "Ein Mann fährt Fahrrad."]
    translator, tok = ct2.load_ct2(out)
    assert ct2.ct2_translate(translator, tok, lines, beam_size=1) == pretrained("multi30k-de-en").translate(lines, beam_size=1)

def test_each_decoder_runs_in_its_own_process_and_a_failing_one_is_named(ckpt, tmp_path):
    "compare_ct2's decoders live in processes of their own; one that cannot start says which, and none is left running."
    with pytest.raises(RuntimeError, match=r"the ct2_float32 decoder: FileNotFoundError: .*no model\.bin"):
        ct2.DecoderProcesses({"ours": ckpt, "ct2_float32": tmp_path / "missing"}, 1, 64)
    d = ct2.DecoderProcesses({"ours": ckpt, "ours_unpacked": ckpt}, 1, 64)
    try:
        pids = {n: p.pid for n, p in d.procs.items()}
        assert len(set(pids.values())) == 2 and os.getpid() not in pids.values()
        (a, s), (b, _) = d.run("ours", ["a b c", "d e f"], beam_size=2), d.run("ours_unpacked", ["a b c", "d e f"], beam_size=2)
        assert a == b and len(a) == 2 and s > 0
    finally: d.close()
    assert all(p.poll() is not None for p in d.procs.values())
