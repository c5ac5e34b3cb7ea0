"""Notebook widgets that replay a small program under each tape policy: ``TapeExplorer`` (step by
step, with backward on a chosen output) and ``MergeViewer`` (the same program just before and
just after a merge of two tapes)."""

from .explorer import TapeExplorer
from .merge import MergeViewer
from .replay import POLICIES, Moment, Replay

__all__ = ["TapeExplorer", "MergeViewer", "Replay", "Moment", "POLICIES"]
