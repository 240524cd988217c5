#!/bin/bash
# The RNN baseline run of nbs/00a_background.ipynb: at-train multi30k --model rnn, stopped by SIGTERM after 1200 s of
# training (timeout starts once cpuslot has a core), one thread, bf16 autocast (the multi30k preset's precision).
cd "$(dirname "$0")/../.." && PYTHONPATH=$PWD /work/bin/cpuslot timeout -s TERM 1200 \
  python -m annotated_transformer.tasks multi30k --model rnn --rnn_cell lstm --rnn_attention bahdanau \
  --d_model 280 --n_layers 2 --clip_norm 1.0 --max_steps 100000 --save_every 100 --keep_last 10 --eval_every 200 \
  --device cpu --data_dir ../../shared/data --no-download --run_dir runs/multi30k-rnn --no-progress
