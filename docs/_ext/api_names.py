"""The ``tapekit-names`` directive: one autodoc entry for each public name of a module.

```{tapekit-names} tapekit.ops.reduce
```

documents every name in the module's ``__all__`` (or the names given as the directive's content),
each under the name a learner calls it by: ``tapekit.sum`` where ``tk.sum`` is the same object,
else ``tapekit.ops.reduce.<name>``. A name added to ``__all__`` appears without editing a page.
"""

from __future__ import annotations

import importlib
import inspect

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles

import tapekit


def public_module(module: str, name: str, obj: object) -> str:
    """``tapekit`` when ``tk.<name>`` is ``obj``, else the module that lists it."""
    return "tapekit" if getattr(tapekit, name, None) is obj else module


def entry(module: str, name: str, obj: object) -> list[str]:
    """The autodoc directive for one name, as reStructuredText lines."""
    if inspect.isclass(obj) and issubclass(obj, BaseException):
        kind, options = "autoexception", ["   :show-inheritance:"]
    elif inspect.isclass(obj):
        inherits = [] if obj.__bases__ == (object,) else ["   :show-inheritance:"]  # no empty "Bases:"
        kind, options = "autoclass", ["   :members:", *inherits]
    elif callable(obj):
        kind, options = "autofunction", []
    else:
        kind, options = "autodata", ["   :no-value:"]
    return [f".. {kind}:: {public_module(module, name, obj)}.{name}", *options, ""]


class TapekitNames(SphinxDirective):
    required_arguments = 1
    has_content = True

    def run(self) -> list[nodes.Node]:
        module_name = self.arguments[0]
        module = importlib.import_module(module_name)
        names = " ".join(self.content).split() or list(module.__all__)
        lines = [line for name in names for line in entry(module_name, name, getattr(module, name))]
        holder = nodes.section()
        nested_parse_with_titles(self.state, StringList(lines, source=self.get_source_info()[0]), holder)
        return holder.children


def drop_object_base(app, name: str, obj: object, options: dict, bases: list) -> None:
    """``Bases: object`` says nothing: show a class's bases only when it has some."""
    if bases == [object]:
        bases.clear()


def skip_foreign_member(app, what: str, name: str, obj: object, skip: bool, options: dict) -> bool | None:
    """A class's members written outside tapekit are not documented here (matplotlib gives every
    subclass of its figures a ``set`` of its own, whose docstring uses matplotlib's own roles)."""
    module = getattr(obj, "__module__", None) or ""
    if what == "class" and callable(obj) and not module.startswith("tapekit"):
        return True
    return None


def setup(app):
    app.add_directive("tapekit-names", TapekitNames)
    app.connect("autodoc-process-bases", drop_object_base)
    app.connect("autodoc-skip-member", skip_foreign_member)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
