"""Part II, training (§5): data, batches, the optimizer and its schedule, label smoothing, decoding, BLEU, the copy task."""
