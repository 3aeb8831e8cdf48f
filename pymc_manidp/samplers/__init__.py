"""Samplers layer: MCMC through PyMC (exact samplers follow)."""
