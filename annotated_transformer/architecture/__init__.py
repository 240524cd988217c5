"""Part I, the model (§3-4): attention, the layers, embeddings, the Transformer, why self-attention."""
