"""A new kind of model is one module plus one registry line: a toy kind, defined and registered in this file alone (its config,
its model, its objective), trains through the `Trainer` as the launcher builds it, resumes, loads back from its checkpoint and
evaluates with its own metrics; nothing in the package names it. The fixture unregisters it, so other tests never see it."""
from dataclasses import dataclass
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from annotated_transformer.engine.config import TrainConfig
from annotated_transformer.engine.kinds import KINDS, ModelKind, register, kind_of, kind_named
from annotated_transformer.engine.checkpoint import load_checkpoint
from annotated_transformer.engine.runs import read_metrics
from annotated_transformer.engine.train import Trainer, seed_everything

# ---------------------------------------------------------------- the toy kind: what a new module would hold

@dataclass
class ToyConfig:
    "Does a sequence of token ids contain the id 3? A bag of embeddings and a linear layer."
    vocab_size: int = 8
    d_model: int = 16  # the trainer's schedule reads it (equation 3)
    n_classes: int = 2


class ToyModel(nn.Module):
    def __init__(self, cfg: ToyConfig):
        super().__init__()
        self.cfg = cfg
        self.embed, self.out = nn.Embedding(cfg.vocab_size, cfg.d_model), nn.Linear(cfg.d_model, cfg.n_classes)

    def forward(self, x): return self.out(self.embed(x).mean(1))  # (B, T) -> (B, C)


@dataclass
class ToyBatch:
    x: torch.Tensor  # (B, T) token ids
    y: torch.Tensor  # (B,) classes
    def to(self, device, non_blocking=False): return ToyBatch(self.x.to(device), self.y.to(device))


class ToyLoader:
    "Batches of 8 examples, shuffled per epoch; `set_epoch(epoch, start)` is the position a resumed run continues from."
    def __init__(self, x, y, shuffle=True):
        self.x, self.y, self.shuffle, self.epoch, self.start = x, y, shuffle, 0, 0

    def set_epoch(self, epoch, start=0): self.epoch, self.start = epoch, start
    def __len__(self): return len(self.x) // 8

    def __iter__(self):
        order = torch.randperm(len(self.x), generator=torch.Generator().manual_seed(self.epoch)) if self.shuffle else torch.arange(len(self.x))
        for i in range(self.start, len(self)):
            j = order[8 * i: 8 * i + 8]
            yield ToyBatch(self.x[j], self.y[j])


class ToyObjective:
    "Cross-entropy summed over examples; validation: loss, accuracy and examples."
    def count(self, b): return len(b.y)  # the loss is a mean per example
    def tokens(self, b): return b.x.numel()  # tokens/s counts ids
    def loss(self, net, b): return F.cross_entropy(net(b.x).float(), b.y, reduction="sum")
    trial_loss = loss  # what the precision and compile trials time

    def eval_sums(self, model, b):
        logits = model(b.x).float()
        return torch.stack([F.cross_entropy(logits, b.y, reduction="sum"), (logits.argmax(-1) == b.y).sum(),
                            torch.tensor(len(b.y), device=b.x.device)]).double()

    def eval_metrics(self, sums):
        loss, right, n = sums.tolist()
        return dict(val_loss=loss / n, val_acc=right / n, val_examples=int(n))


def toy_objective(model_config, tokenizer): return ToyObjective()

# ---------------------------------------------------------------- tests


@pytest.fixture
def toy(monkeypatch, tmp_path):
    "The toy kind, registered for one test (the one line a new kind adds), then removed."
    monkeypatch.setenv("AT_CACHE_DIR", str(tmp_path / "cache"))  # the precision and compile trials remember nothing outside the test
    assert "toy" not in KINDS
    kind = register(ModelKind("toy", ToyConfig, ToyModel, reads="ids", objective=toy_objective))
    yield kind
    del KINDS["toy"]
    with pytest.raises(TypeError, match="no registered model kind has the config ToyConfig"): kind_of(ToyConfig())


def data(n, seed):
    x = torch.randint(0, 8, (n, 6), generator=torch.Generator().manual_seed(seed))
    return x, (x == 3).any(1).long()


def toy_trainer(run_dir, max_steps, **kw):
    "The toy model and its objective built from its kind, as the launcher builds every model: `kind_of`, `build`, `make_objective`."
    seed_everything(0)
    cfg = ToyConfig()
    kind = kind_of(cfg)
    tcfg = TrainConfig(**dict(dict(max_steps=max_steps, warmup_steps=2, lr_factor=2.0, device="cpu", run_dir=str(run_dir),
                                   progress=False, log_every=1, save_every=2, eval_every=2, keep_best="val_acc"), **kw))
    return Trainer(kind.build(cfg), tcfg, ToyLoader(*data(64, 0)), ToyLoader(*data(32, 1), shuffle=False),
                   objective=kind.make_objective(cfg, None), extra=dict(task="toy"))


def params(m): return torch.cat([p.detach().flatten() for p in m.parameters()])


def test_a_toy_kind_trains_resumes_loads_and_evaluates(toy, tmp_path):
    assert kind_named("toy") is toy and kind_of(ToyConfig()) is toy
    full = toy_trainer(tmp_path / "full", max_steps=6)
    assert isinstance(full.objective, ToyObjective) and isinstance(full.model, ToyModel)
    out = full.fit()
    recs = read_metrics(tmp_path / "full")
    train = [r for r in recs if "loss" in r]
    assert [r["step"] for r in train] == list(range(1, 7))
    assert all(r["tokens_per_s"] > 0 for r in train)  # tokens: the objective's (6 ids an example)
    assert [r["step"] for r in recs if "val_acc" in r] == [2, 4, 6] and set(out) >= {"val_loss", "val_acc", "val_examples"}
    assert out["val_examples"] == 32 and 0 <= out["val_acc"] <= 1

    # saved: the checkpoint names the kind, and rebuilds the toy model with the trained weights
    ck = load_checkpoint(tmp_path / "full")
    assert ck.kind == "toy" and ck.step == 6 and ck.model_config == dict(vocab_size=8, d_model=16, n_classes=2)
    model = ck.build()
    assert isinstance(model, ToyModel) and torch.equal(params(model), params(full.model))
    best = load_checkpoint(tmp_path / "full" / "best.pt")
    assert best.kind == "toy" and best.best["metric"] == "val_acc" and best.best["step"] in (2, 4, 6)

    # resumed: 3 steps, then a new Trainer with resume=True continues to 6, as the uninterrupted run did
    toy_trainer(tmp_path / "part", max_steps=3, save_every=3).fit()
    torch.manual_seed(123)  # resume restores the generators
    resumed = toy_trainer(tmp_path / "part", max_steps=6, save_every=3, resume=True)
    assert resumed.step == 3
    resumed.fit()
    losses = lambda run: [r["loss"] for r in read_metrics(run) if "loss" in r]
    assert losses(tmp_path / "part") == losses(tmp_path / "full")
    assert torch.equal(params(resumed.model), params(full.model))

    # evaluated: the trainer's evaluate is the objective's metrics of the loaded model over the loader
    x, y = data(32, 1)
    with torch.no_grad(): logits = model(x)
    v = full.evaluate()
    assert v == pytest.approx(dict(val_loss=F.cross_entropy(logits, y).item(), val_acc=(logits.argmax(-1) == y).float().mean().item(),
                                   val_examples=32), rel=1e-6)


def test_the_trainer_checks_a_resumed_toy_run_against_its_config(toy, tmp_path):
    "Resume compares the checkpoint's config with the model's, whatever the kind: another toy config is refused by field."
    toy_trainer(tmp_path, max_steps=2).fit()
    cfg = ToyConfig(d_model=8)
    tcfg = TrainConfig(max_steps=4, device="cpu", run_dir=str(tmp_path), progress=False, resume=True)
    from annotated_transformer.engine.train import TrainingError
    with pytest.raises(TrainingError, match=r"another model config .*'d_model': \(8, 16\)"):
        Trainer(toy.build(cfg), tcfg, ToyLoader(*data(64, 0)), objective=toy.make_objective(cfg, None))


def test_the_trainer_names_no_kind_of_model():
    "The trainer asks the objective: it reads no batch field, no model part and no model class, and has one path for all kinds."
    import inspect
    from annotated_transformer.engine import train
    src = inspect.getsource(train)
    for word in ("tgt_out", "pad_idx", ".generator", "Transformer", "ChartObjective", "self.objective is None", "self.objective is not None"):
        assert word not in src, word
