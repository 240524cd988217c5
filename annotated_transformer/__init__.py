"""annotated_transformer: "Attention Is All You Need", annotated. The names a user of the notebooks reaches for, at the root:

    from annotated_transformer import TransformerConfig, make_model, Trainer, TrainConfig, greedy_decode, beam_search

Each name lives in the module of its notebook (`annotated_transformer.architecture.model` is nbs/04_model.ipynb, and so
on) and is imported from there on first use, so `import annotated_transformer` stays cheap (no torch until a name is
used). This file is written by hand: `nbdev_export` only rewrites its `__version__` line.
"""
__version__ = "0.1.0"

_EXPORTS = {  # module -> the names it gives the package root (never a name that is also a module)
    "engine.config": ["TrainConfig"],
    "architecture.attention": ["causal_mask", "padding_mask", "MultiHeadAttention"],
    "architecture.layers": ["PositionwiseFeedForward", "EncoderLayer", "DecoderLayer"],
    "architecture.embeddings": ["Embeddings", "PositionalEncoding"],
    "architecture.model": ["TransformerConfig", "Encoder", "Decoder", "Transformer", "make_model", "count_parameters"],
    "training.data": ["SubwordTokenizer", "default_data_dir", "copy_task_pairs", "encode_pairs"],
    "engine.recipes": ["load_recipe", "download_multi30k"],
    "training.batching": ["Batch", "collate", "make_loader"],
    "training.optim": ["noam_lr", "make_optimizer", "make_scheduler"],
    "training.loss": ["LabelSmoothingLoss"],
    "training.decode": ["greedy_decode", "beam_search"],
    "training.copy_task": ["train_copy", "copy_accuracy"],
    "translation.inference": ["translate", "bleu_scores"],
    "engine.checkpoint": ["save_model", "load_checkpoint", "Checkpoint", "average_checkpoints", "average_last", "CheckpointError"],
    "engine.runs": ["read_metrics", "plot_metrics", "training_summary"],
    "engine.precision": ["resolve_precision"],
    "engine.train": ["Trainer"],
    "engine.tasks": ["TASKS", "task_preset", "DataSpec"],
    "parsing.trees": ["Tree", "parse_tree", "linearize"],
    "parsing.parser": ["parse"],
    "engine.kinds": ["Translator", "ConstituencyParser"],
    "engine.loading": ["load_model"],
    "engine.shipped_models": ["pretrained", "shipped_names"],
    "before.background": ["RNNConfig", "make_rnn"],
}
_WHERE = {name: module for module, names in _EXPORTS.items() for name in names}
__all__ = list(_WHERE)

def __getattr__(name: str):
    "Import a root name from its module on first use (PEP 562)."
    if name not in _WHERE: raise AttributeError(f"module 'annotated_transformer' has no attribute {name!r}")
    import importlib
    value = getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    globals()[name] = value
    return value

def __dir__(): return sorted(list(globals()) + __all__)

def _script(func: str, prog: str, module: str = "cli"):
    "A console script's entry point: it imports the command line (and torch) itself, so that Ctrl-C during that import is one line and exit 130."
    def load():  # the slow part, called by `start` once its signal handler is in place; by name, as every root name is
        import importlib
        return getattr(importlib.import_module(f"{__name__}.commands.{module}"), func)
    def main():
        # first of all (`_signal` is built in: nothing to load): Ctrl-C and SIGTERM wait, blocked, for `start`'s handler
        import _signal as s
        if hasattr(s, "pthread_sigmask"): s.pthread_sigmask(s.SIG_BLOCK, {s.SIGINT, s.SIGTERM})
        # stdlib only (argparse and a few more): `start` unblocks them, its handler in place
        from .commands.console import start
        return start(load, prog)
    main.__name__ = main.__qualname__ = func
    return main

# the console scripts of settings.ini (`at-train=annotated_transformer:at_train`, ...)
at_train, at_translate, at_evaluate = _script("train_main", "at-train"), _script("translate_main", "at-translate"), _script("evaluate_main", "at-evaluate")
at_parse = _script("parse_main", "at-parse")
at_variations = _script("variations_main", "at-variations", "experiments")
at_bench = _script("bench_main", "at-bench", "experiments")
