"""Every differentiable op. Each is one short function whose backward rules sit beside its forward.

Each module lists its public ops in ``__all__``; all of them are ``tk.`` functions too.

An op of two operands takes a Python number as either one, and on the numpy device (``tk.Cpu()``)
a numpy array too (``t * np.arange(3.0)``, ``np.arange(3.0) * t``, and so the comparisons and ``@``):
a constant, with no gradient, whose float values take the tensor's dtype as a number's do. On
``tk.Cuda()`` and the strict device a numpy array is refused with ``DeviceMismatchError``: make it a
tensor there with ``dev.tensor(array)``."""

from . import arithmetic, elementwise, linalg, reduce, shape
from .arithmetic import *  # noqa: F401,F403
from .elementwise import *  # noqa: F401,F403
from .linalg import *  # noqa: F401,F403
from .reduce import *  # noqa: F401,F403
from .shape import *  # noqa: F401,F403

__all__ = arithmetic.__all__ + elementwise.__all__ + reduce.__all__ + linalg.__all__ + shape.__all__
