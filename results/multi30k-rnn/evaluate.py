"""Evaluate the RNN baseline run exactly as 14_translation evaluated the Transformer: `evaluate_run` (checkpoint or average chosen on val, greedy; test2016 with beam 4 and greedy).

    RNN_BUDGET_S=SECONDS [RNN_SEGMENTS=TEXT] python results/multi30k-rnn/evaluate.py [DATA_DIR]   # from the repository root

RNN_BUDGET_S is the wall-clock budget the run trained for (results/multi30k-rnn/train.sh); it is recorded in results.json.
"""
import argparse, json, os, sys
from pathlib import Path
from annotated_transformer.engine.recipes import load_recipe
from annotated_transformer.engine.evaluation import evaluate_run

def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], epilog=__doc__.split("\n\n", 1)[1], formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("data_dir", nargs="?", default="../shared/data", help="the data directory that holds multi30k/ (default: ../shared/data)")
    ap.add_argument("--run", default="runs/multi30k-rnn", help="the RNN baseline's run directory (default: runs/multi30k-rnn)")
    a = ap.parse_args(argv)
    if not os.environ.get("RNN_BUDGET_S", "").isdigit(): ap.error("RNN_BUDGET_S: expected the run's wall-clock budget in seconds")
    here = Path(__file__).parent
    valid, test = load_recipe("multi30k", "val", a.data_dir), load_recipe("multi30k", "test", a.data_dir)
    res = evaluate_run(a.run, valid, test, here, average=(3, 5))
    # train_command() only knows TransformerConfig fields; record the command that was run (train.sh) instead
    res["command"] = ("at-train multi30k --model rnn --rnn_cell lstm --rnn_attention bahdanau --d_model 280 --n_layers 2 "
                      "--clip_norm 1.0 --warmup_steps 400 --lr_factor 0.7 --max_steps 100000 --save_every 100 --keep_last 10 --eval_every 200 --device cpu "
                      f"(stopped by SIGTERM after a wall-clock budget of {os.environ['RNN_BUDGET_S']} s: results/multi30k-rnn/train.sh, {os.environ.get('RNN_SEGMENTS', 'one segment')})")
    res["time_budget_s"] = int(os.environ["RNN_BUDGET_S"])
    (here / "results.json").write_text(json.dumps(res, indent=1) + "\n", encoding="utf-8")
    print({k: res[k] for k in ("chosen", "steps", "parameters")}, "test BLEU beam", round(res["test_beam"]["bleu"], 2),
          "greedy", round(res["test_greedy"]["bleu"], 2), "train_wall_s", res["training"]["train_wall_s"])
    return 0

if __name__ == "__main__": sys.exit(main())
