"""Low-level kernels of the manifolds: NumPy numerics, PyTensor twins, numba matrix kernels.

Private: the manifold classes of :mod:`pymc_manidp.geometry` are the interface. The
PyTensor and numba modules here are imported by a manifold only when a log-density
graph needs them, so ``import pymc_manidp.geometry`` loads neither PyMC nor PyTensor.
"""
