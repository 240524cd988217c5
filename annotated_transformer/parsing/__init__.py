"""Part III's constituency parsing (§6.3): trees, EVALB, the sequence-to-sequence and chart parsers."""
