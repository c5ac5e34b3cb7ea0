"""Pictures of tapes: the op DAG coloured by tape (``dag``), and how a program's records are split
across tapes at chosen moments (``snapshot``, ``plot_partition``) and what that does to each leaf's
gradient (``gradient_split``, ``plot_gradient_split``). One legend everywhere: one name and one
colour per tape and one label per tensor (`tapekit.ids`), leaves white and outlined, outputs bold,
records a backward let go grey and dashed, a missing gradient in red."""

from .dag import DagPicture, dag, draw
from .palette import TAPE_COLOURS, TapeLooks
from .partition import OutputShare, Snapshot, TapeShare, plot_partition, snapshot
from .picture import Picture, save
from .scene import Scene, capture
from .split import GradientSplit, gradient_split, plot_gradient_split


def __getattr__(name: str) -> type:
    """``PartitionFigure``, the class of every plot, made on first use: it loads matplotlib."""
    if name == "PartitionFigure":
        from .partition import _figure_class
        return _figure_class()
    raise AttributeError(f"module 'tapekit.viz' has no attribute {name!r}")


__all__ = ["dag", "draw", "save", "DagPicture", "PartitionFigure",
           "snapshot", "plot_partition", "Snapshot", "TapeShare", "OutputShare",
           "gradient_split", "plot_gradient_split", "GradientSplit",
           "Picture", "Scene", "capture", "TapeLooks", "TAPE_COLOURS"]
