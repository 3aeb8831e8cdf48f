"""Each shipped manifold's kernels in chart coordinates, for the fused log-densities.

One module per space (named by the manifold's ``fused_kernels``), each with the same
three functions (numba, cached in the package's checked cache folder):

- ``params(manifold)``: the float64 constants the kernels read (Python);
- ``log_volume_density(c, frame, params, g_c)``: ``log J(c)`` of the exp chart,
  exactly ``manifold.pt_log_volume_density(c)``, adding its gradient in ``c`` into
  ``g_c``;
- ``kng_norm(c, frame, params, data, weight, g_c)``: KNG's norm
  ``||sum_i log_x(x_i)||_x`` at ``x = exp_frame(frame, c)``, exactly
  ``manifold.pt_frechet_gradient_norm``, adding ``weight`` times its exact gradient in
  ``c`` into ``g_c``, in one pass over the records.

``frame`` is the tuple of ``manifold.chart_frame(origin)``'s arrays, in order.
:mod:`pymc_manidp.laws.fused.density` composes them with the polar chart.
"""
