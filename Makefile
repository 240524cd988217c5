# Convenience targets; each one is a single command that also works without make.
.PHONY: docs readme readme-check docs-test

docs:          ## build the documentation site into docs/ (warnings are errors)
	python tools/build_docs.py

readme:        ## regenerate README.md from nbs/index.ipynb
	python tools/build_docs.py readme

readme-check:  ## fail if README.md is stale
	python tools/build_docs.py readme --check

docs-test: docs  ## build, then check every page in headless Chromium
	python -m pytest tests/test_docs.py -v --slow
