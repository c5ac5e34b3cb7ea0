"""Every differentiable op. Each is one short function whose backward rules sit beside its forward.

Each module lists its public ops in ``__all__``; all of them are ``tk.`` functions too."""

from . import arithmetic, elementwise, linalg, reduce, shape
from .arithmetic import *  # noqa: F401,F403
from .elementwise import *  # noqa: F401,F403
from .linalg import *  # noqa: F401,F403
from .reduce import *  # noqa: F401,F403
from .shape import *  # noqa: F401,F403

__all__ = arithmetic.__all__ + elementwise.__all__ + reduce.__all__ + linalg.__all__ + shape.__all__
