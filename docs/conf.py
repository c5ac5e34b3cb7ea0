"""The tapekit site: Sphinx and MyST-NB, the tools JAX's docs and most scientific Python sites use.

`make docs` builds it into docs/_build/html with no network: the tutorials are read with the
outputs they were saved with (never run), math is MathML made at build time, and the theme's assets
are all in the package. The tutorials are notebooks/, copied into docs/tutorials/ as each build
starts (tutorials.py).
"""

from __future__ import annotations

import sys
from pathlib import Path

HERE = Path(__file__).parent
sys.path[:0] = [str(HERE.parent), str(HERE / "_ext")]  # this checkout's tapekit, and the site's extensions

import tapekit  # noqa: E402
from source_links import linkcode_resolve  # noqa: E402,F401  (sphinx.ext.linkcode looks it up here)

project = "tapekit"
author = "the tapekit authors"
copyright = "tapekit authors, MIT licence"
release = version = tapekit.__version__

extensions = ["myst_nb", "sphinx.ext.autodoc", "sphinx.ext.linkcode",
              "api_names", "tutorials", "mathml", "benchmarks_page", "source_links"]  # these five in _ext/
exclude_patterns = ["_build", "**.ipynb_checkpoints"]
suppress_warnings: list[str] = []
if not (HERE / "reading-guide.md").exists():  # a checkout without the guide builds, its toctree entry left out
    suppress_warnings.append("toc.not_readable")

# The tutorials as saved: never executed, each widget showing its saved static view (saved_widgets.py).
nb_execution_mode = "off"
nb_custom_formats = {".ipynb": ("saved_widgets.read_notebook", {}, False)}
nb_mime_priority_overrides = [("html", "application/vnd.jupyter.widget-view+json", None)]
nb_ipywidgets_js: dict = {}  # MyST-NB's default loads ipywidgets' embedder from a CDN
myst_enable_extensions = ["dollarmath", "colon_fence"]
myst_heading_anchors = 3

default_role = "py:obj"  # a docstring's `name` links to that name's entry, or shows as code
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_preserve_defaults = True
add_module_names = False
maximum_signature_line_length = 99  # a longer signature lists one parameter a line, as black writes it

html_theme = "sphinx_book_theme"
html_title = "tapekit"
html_math_renderer = "mathml"
html_favicon = "_static/favicon.svg"
html_context = {"default_mode": "auto"}  # light or dark as the reader's system is; the theme needs it said
html_static_path = ["_static"]
html_css_files = ["tapekit.css"]
html_domain_indices = False  # no module index: the API pages are the index of names
html_sourcelink_suffix = ""  # each tutorial downloads as its .ipynb
html_theme_options = {
    "repository_url": "https://github.com/tapekit/tapekit",
    "use_repository_button": True,
    "use_download_button": True,
    "use_fullscreen_button": False,
    "show_toc_level": 2,
    "navbar_persistent": [],  # one search box, the sidebar's (pydata-sphinx-theme 0.20 adds one above the page)
}
