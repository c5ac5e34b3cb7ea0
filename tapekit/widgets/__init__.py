"""Notebook widgets that replay a small program under each tape policy: ``TapeExplorer`` (step by
step, with backward on a chosen output), ``MergeViewer`` (the same program just before and just
after a merge of two tapes) and ``BackwardPlayer`` (one backward on it, record by record)."""

from .explorer import TapeExplorer
from .merge import MergeViewer
from .player import BackwardPlayer
from .replay import POLICIES, Moment, Replay

__all__ = ["TapeExplorer", "MergeViewer", "BackwardPlayer", "Replay", "Moment", "POLICIES"]
