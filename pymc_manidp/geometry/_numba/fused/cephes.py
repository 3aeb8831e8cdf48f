"""Cephes' ``atan`` coefficients (atan.c, Stephen L. Moshier, double precision): the
rational approximation on ``|x| <= tan(pi/8)`` after the reduction by ``pi/4`` or
``pi/2``, and the low bits of ``pi/2``; shared by the branch-free
``atan2`` of the fused kernels (``kendall._atan2_pos``, ``rotations._atan2_upper``).

Numba compiles these tuples into the kernels as constants; the kernels' cache key
covers this file (``geometry/_numba/cache.py``), so a change here recompiles them.
"""

from __future__ import annotations

__all__ = ["ATAN_P", "ATAN_Q", "MOREBITS", "TAN_3PI_8"]

ATAN_P = (
    -8.750608600031904122785e-1,
    -1.615753718733365076637e1,
    -7.500855792314704667340e1,
    -1.228866684490136173410e2,
    -6.485021904942025371773e1,
)
ATAN_Q = (
    2.485846490142306297962e1,
    1.650270098316988542046e2,
    4.328810604912902668951e2,
    4.853903996359136964868e2,
    1.945506571482613964425e2,
)
TAN_3PI_8 = 2.41421356237309504880
MOREBITS = 6.123233995736765886130e-17  # pi/2 - float(pi/2)
