"""Execute the tutorial notebooks in place and stamp each code cell with a hash of its source.

    .venv/bin/python tools/run_notebooks.py                      # every numbered notebook
    .venv/bin/python tools/run_notebooks.py notebooks/04_*.ipynb  # some of them

Each notebook runs top to bottom in a fresh ``python3`` kernel (the one of the Python running this
script) with ``notebooks/`` as its working directory. Outputs and widget state are saved in the file,
so the tutorials read well before anyone runs them and their widgets render on open.
``tests/test_notebooks_fresh.py`` compares the stamps with the sources, so a cell edited after its
outputs were made fails the suite until this script runs again.

Each notebook is saved as JupyterLab would save it, so one opened and closed untouched is not
marked changed: nbformat 4.5, every cell with a stable id, consecutive prints of a cell in one
output (JupyterLab joins them on open), the kernelspec and ``language_info`` as the kernel that ran
it reports them (JupyterLab writes those on open; a reader on another Python
version gets that version written, which nothing in the file can prevent), no widget state left
from an earlier run.
"""

from __future__ import annotations

import hashlib
import sys
import time
from pathlib import Path

NOTEBOOKS = Path(__file__).resolve().parent.parent / "notebooks"
STAMP = "tapekit"  # the code-cell metadata key holding {"source_sha": ...}
CELL_TIMEOUT_S = 300
KERNEL = "python3"  # the kernel of the Python running this script


def source_sha(source: str) -> str:
    """The hash a code cell's source is stamped with."""
    return hashlib.sha256(source.encode("utf-8")).hexdigest()[:16]


def numbered_notebooks() -> list[Path]:
    """The tutorials, in order: ``notebooks/00_tour.ipynb`` ... ``09_*.ipynb``."""
    return sorted(NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


def stamp(nb) -> None:
    """Record each code cell's source hash in its metadata."""
    for cell in nb.cells:
        if cell.cell_type == "code":
            cell.metadata.setdefault(STAMP, {})["source_sha"] = source_sha(cell.source)


def give_ids(nb) -> None:
    """Give every cell without one an id, ``c`` and its place (kept ids stay, so diffs stay small)."""
    taken = {cell.get("id") for cell in nb.cells}
    for number, cell in enumerate(nb.cells):
        if cell.get("id"):
            continue
        fresh, again = f"c{number:02d}", 0
        while fresh in taken:
            again += 1
            fresh = f"c{number:02d}-{again}"
        cell.id = fresh
        taken.add(fresh)


def join_streams(nb) -> None:
    """Join each run of consecutive stream outputs of one stream (stdout, stderr) into one, as
    JupyterLab shows and saves them."""
    for cell in nb.cells:
        joined = []
        for out in cell.get("outputs", []):
            if joined and out.output_type == joined[-1].output_type == "stream" and out.name == joined[-1].name:
                joined[-1].text += out.text
            else:
                joined.append(out)
        if cell.cell_type == "code":
            cell.outputs = joined


def as_jupyterlab_saves(nb, kernel: str) -> None:
    """The notebook's format and metadata as JupyterLab would write them with ``kernel`` running."""
    import nbformat
    from jupyter_client.kernelspec import KernelSpecManager

    spec = KernelSpecManager().get_kernel_spec(kernel)
    nb.nbformat, nb.nbformat_minor = 4, nbformat.v4.nbformat_minor
    nb.metadata["kernelspec"] = {"name": kernel, "display_name": spec.display_name, "language": spec.language}
    give_ids(nb)
    join_streams(nb)


def execute(path: Path) -> float:
    """Run ``path`` top to bottom in a fresh kernel, save it with its outputs; the seconds it took."""
    import nbformat
    from nbclient import NotebookClient

    nb = nbformat.read(path, as_version=4)
    nb.metadata.pop("widgets", None)  # the run stores the state of the widgets it makes, and only those
    client = NotebookClient(nb, kernel_name=KERNEL, timeout=CELL_TIMEOUT_S, record_timing=False,
                            store_widget_state=True, resources={"metadata": {"path": str(path.parent)}})
    start = time.perf_counter()
    client.execute()  # sets language_info from the kernel, as JupyterLab does on open
    seconds = time.perf_counter() - start
    as_jupyterlab_saves(nb, KERNEL)
    stamp(nb)
    nbformat.write(nb, path)
    return seconds


def main(argv: list[str]) -> int:
    paths = [Path(a).resolve() for a in argv] or numbered_notebooks()
    for path in paths:
        seconds = execute(path)
        print(f"{path.name:40s} {seconds:6.1f} s", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
