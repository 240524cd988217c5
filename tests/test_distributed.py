"""Two gloo processes on CPU == one process on the same global batch; disagreeing ranks fail; CUDA/NCCL when present."""
import pytest
import torch
from annotated_transformer.training.data import copy_task_pairs
from annotated_transformer.training.batching import ShardedTokenBatchSampler
from annotated_transformer.engine.distributed import launch_local, ddp_copy_run, _disagreeing_demo, init_distributed

pytestmark = pytest.mark.skipif(not torch.distributed.is_available() or not torch.distributed.is_gloo_available(),
                                reason="torch.distributed with gloo is not available")


def test_two_gloo_ranks_equal_one_process():
    pairs = copy_task_pairs(128, vocab_size=16, min_len=2, max_len=9, seed=0)
    # the comparison is only meaningful if both runs see the same batches
    assert (ShardedTokenBatchSampler.from_pairs(pairs, max_tokens=50, world_size=2).batches(0)
            == ShardedTokenBatchSampler.from_pairs(pairs, max_tokens=50, world_size=1).batches(0))
    ranks = launch_local(ddp_copy_run, 2)  # 2 ranks x 2 micro-batches (no_sync on the first)
    single = ddp_copy_run()  # 1 process x 4 micro-batches
    assert [r["world_size"] for r in ranks] == [2, 2] and single["world_size"] == 1
    assert torch.equal(ranks[0]["params"], ranks[1]["params"])
    assert ranks[0]["losses"] == pytest.approx(single["losses"], rel=1e-5)
    torch.testing.assert_close(ranks[0]["params"], single["params"], rtol=1e-5, atol=1e-6)
    start = ddp_copy_run(steps=1, max_steps=1)["params"]
    assert not torch.allclose(start, single["params"])  # training moved the parameters


def test_disagreeing_ranks_fail_with_the_field():
    with pytest.raises(RuntimeError, match="ranks disagree on settings field 'seed': rank 0 has 0, rank 1 has 1"):
        launch_local(_disagreeing_demo, 2)


def test_ranks_refuse_another_runs_directory_together(tmp_path):
    "A new DDP run over a run's checkpoints fails on every rank at once: rank 0 names why, the others point to rank 0 (no hang)."
    from annotated_transformer.engine.checkpoint import list_checkpoints
    ddp_copy_run(steps=1, run_dir=str(tmp_path))  # one process leaves a run (its final checkpoint) in tmp_path
    assert list_checkpoints(tmp_path)
    with pytest.raises(RuntimeError, match=r"rank 0: .*continue it with --resume.*; rank 1: TrainingError: rank 0 refused run_dir"):
        launch_local(ddp_copy_run, 2, 1, 4, str(tmp_path))

def test_single_process_without_torchrun():
    info = init_distributed("cpu")
    assert (info.rank, info.world_size, info.is_main) == (0, 1, True)


@pytest.mark.cuda
@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("precision", ["bf16", "fp16", "fp32"])
def test_cuda_precisions_train(tmp_path, precision):
    import sys; from pathlib import Path
    sys.path.insert(0, str(Path(__file__).parent))
    from test_train import make_trainer
    tr = make_trainer(tmp_path, device="cuda", precision=precision, max_steps=3)
    out = tr.fit()
    assert tr.device.type == "cuda" and torch.isfinite(torch.tensor(out["loss"]))
    assert (tr.scaler.is_enabled()) == (precision == "fp16")


@pytest.mark.multigpu
@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs")
def test_nccl_two_gpus_run_copy(tmp_path):
    import subprocess, sys
    r = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node=2",
                        "-m", "annotated_transformer.commands.cli", "copy", "--device", "cuda", "--max_steps", "50",
                        "--run_dir", str(tmp_path)], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr[-3000:]
    assert (tmp_path / "latest").is_file()


def _tokenizer_of_this_rank(data_dir: str, run_dir: str):
    "Under a process group: build the translation task's data as at-train does; the tokenizer each rank ends up with."
    from annotated_transformer.engine.tasks import task_preset, build_data
    from annotated_transformer.engine.distributed import init_distributed
    info = init_distributed("cpu")
    m, t, d = task_preset("multi30k")
    d.data_dir, d.download, d.vocab_size, t.run_dir = data_dir, False, 320, run_dir
    data = build_data(d, m, t, info.rank, info.world_size)
    return dict(rank=info.rank, state=data.tokenizer.state_dict(), vocab=data.model_config.src_vocab_size)


def test_ranks_share_one_tokenizer_without_files(tmp_path):
    "Rank 0 trains the tokenizer and sends it; no rank writes or reads a tokenizer file (the checkpoints carry it)."
    from conftest import write_tiny_multi30k
    (tmp_path / "data").mkdir(); data = write_tiny_multi30k(tmp_path / "data", 20)
    ranks = launch_local(_tokenizer_of_this_rank, 2, str(data), str(tmp_path / "run"))
    assert [r["rank"] for r in ranks] == [0, 1]
    assert ranks[0]["state"] == ranks[1]["state"] and ranks[0]["vocab"] == ranks[1]["vocab"] == 320
    assert not (tmp_path / "run").exists()  # nothing written beside the checkpoints
