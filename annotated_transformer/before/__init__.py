"""Part IV, before the Transformer: the recurrent encoder-decoder and the attention-pooling classifier."""
