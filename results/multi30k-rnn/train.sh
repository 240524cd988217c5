#!/bin/bash
# The RNN baseline run of nbs/21_background.ipynb: at-train multi30k --model rnn, stopped by SIGTERM after a wall-clock budget (first argument, default 900 s);
# further arguments go to at-train (the run was made as `train.sh 900`, then `train.sh 1320 --resume`: 2220 s in all)
# (the trainer saves a checkpoint and stops on the signal), one thread; the run was made in bf16 autocast (its checkpoints record it).
# On the shared machine it ran inside `/work/bin/cpuslot` (one core, OMP_NUM_THREADS=1), followed by evaluate.py.
cd "$(dirname "$0")/../.." && OMP_NUM_THREADS=1 PYTHONPATH=$PWD timeout -s TERM "${1:-900}" \
  python -m annotated_transformer.commands.cli multi30k --model rnn --rnn_cell lstm --rnn_attention bahdanau \
  --d_model 280 --n_layers 2 --clip_norm 1.0 --warmup_steps 400 --lr_factor 0.7 --max_steps 100000 \
  --save_every 100 --keep_last 10 --eval_every 200 \
  --device cpu --data_dir ../shared/data --no-download --run_dir runs/multi30k-rnn --no-progress "${@:2}"
