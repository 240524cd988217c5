# Sphinx configuration for the docs site. Built by `python tools/build_docs.py` (or `make docs`), which first
# turns nbs/*.ipynb into MyST notebooks under build/docs_src/ with nbdev's processors; do not run sphinx-build
# on nbs/ directly.
import sys
from configparser import ConfigParser
from pathlib import Path

_root = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(_root/'tools'))   # build_docs._pandoc_slug, by name (a function here would not pickle)
_cfg = ConfigParser(); _cfg.read(_root/'settings.ini')
_s = _cfg['DEFAULT']

project = _s['lib_name']
author = _s['author']
copyright = _s['copyright']
release = version = _s['version']

extensions = ['myst_nb']
root_doc = 'index'
exclude_patterns = ['_build', '**.ipynb_checkpoints']
templates_path = ['_templates']
html_static_path = ['_static']
html_css_files = ['custom.css']
html_js_files = ['attention_explorer.js',   # draws every <div class="attention-explorer"> (hand-written, no network)
                 'live_boot.js']   # loads the in-page models' module (live/live.js) on pages with a live box

# notebooks are stored with the outputs of a real run: never execute while building the docs
nb_execution_mode = 'off'
nb_merge_streams = True
nb_ipywidgets_js = {}          # no widgets; and nothing loaded from a CDN
nb_output_stderr = 'show'
# a markdown table printed by a cell (IPython `Markdown(...)`, mime text/markdown) is rendered with the pages' own MyST
# parser; myst-nb's default, 'commonmark', has no tables and left them as raw `| ... |` text
nb_render_markdown_format = 'myst'
suppress_warnings = ['myst.header']   # show_doc entries are H3 whatever the page's heading levels (as with Quarto)

myst_enable_extensions = ['dollarmath', 'amsmath', 'attrs_block', 'attrs_inline', 'colon_fence', 'html_image',
                          'smartquotes', 'strikethrough']
myst_dmath_double_inline = True
# Sphinx's own typography: curly quotes and ellipses, but not dashes, so that a command-line option such as
# `--partitioned` in a table printed by a cell keeps its two hyphens (the default 'qDe' made it an en dash)
smartquotes_action = 'qe'
# heading ids as Pandoc/Quarto make them, so nbdev's doc links (`attention.html#multiheadattention.forward`)
# resolve here as they do on a Quarto-built site; `[x](page.ipynb#slug)` to a missing anchor is a build error
myst_heading_anchors = 6
myst_heading_slug_func = 'build_docs._pandoc_slug'
myst_heading_anchors_html_ids = True

# math is rendered offline by a vendored copy of MathJax 3 (see _static/mathjax/README.md)
mathjax_path = 'mathjax/tex-chtml-full.js'
mathjax3_config = {'tex': {'inlineMath': [['\\(', '\\)']], 'displayMath': [['\\[', '\\]']]}}

html_theme = 'sphinx_book_theme'
html_title = _s['title']
html_theme_options = {
    'home_page_in_toc': True,
    'show_toc_level': 2,
    'use_download_button': False,
    'use_fullscreen_button': False,
    'use_repository_button': False,
    'show_navbar_depth': 1,
    'navigation_with_keys': True,
}
html_last_updated_fmt = None
html_copy_source = False
html_show_sourcelink = False
html_favicon = '_static/favicon.svg'   # also stops browsers requesting a missing /favicon.ico
html_context = {'default_mode': 'light'}
