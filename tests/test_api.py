"The public API at the package root: every advertised name resolves, to the object of its module, and the import is cheap."
import importlib, subprocess, sys, pytest
import annotated_transformer as at

def test_every_advertised_name_resolves():
    assert len(at.__all__) >= 30 and len(set(at.__all__)) == len(at.__all__)
    for name in at.__all__:
        obj = getattr(at, name)
        module = importlib.import_module(f"annotated_transformer.{at._WHERE[name]}")
        assert obj is getattr(module, name), name

def test_the_names_a_notebook_user_reaches_for():
    from annotated_transformer import (TransformerConfig, make_model, Trainer, TrainConfig, greedy_decode, beam_search,
                                       MultiHeadAttention, LabelSmoothingLoss, SubwordTokenizer, load_recipe, task_preset,
                                       load_checkpoint, Checkpoint, average_checkpoints, causal_mask, train_copy)
    model = make_model(TransformerConfig.tiny())
    assert model.cfg.d_model == 64 and callable(greedy_decode) and callable(beam_search)

def test_no_name_shadows_a_submodule():
    "`from annotated_transformer import translate` would give the module or the function depending on import order."
    import pkgutil
    modules = {m.name for m in pkgutil.iter_modules(at.__path__)}
    assert not modules & set(at.__all__)

def test_unknown_name_is_an_attribute_error():
    with pytest.raises(AttributeError, match="no attribute 'make_modle'"): at.make_modle
    with pytest.raises(ImportError): exec("from annotated_transformer import make_modle")

def test_import_is_cheap():
    code = "import sys, annotated_transformer as at; assert 'torch' not in sys.modules; print(at.__version__)"
    r = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
