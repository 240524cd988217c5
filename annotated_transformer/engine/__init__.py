"""Part V, the engine room: configs, model kinds, checkpoints, runs, precision, the trainer, tasks, evaluation, shipped models."""
