"""The console scripts: their start-up plumbing (console) and every command line (cli)."""
