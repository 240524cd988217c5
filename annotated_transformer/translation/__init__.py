"""Part III's translation results (§6.1-6.2): inference, the paper's translation runs, the Table 3 variations."""
