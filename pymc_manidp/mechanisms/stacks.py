"""``release_many``'s stacks of data sets: grouped by size, checked in one pass, drawn
as one stack, one record (or failure) per data set.

:meth:`~pymc_manidp.mechanisms.base.Mechanism.release_many` checks its public
arguments, charges the budget and settles each charge; the functions here do the
rest for a mechanism ``mech``, after the charges: they read the data. A data set that
fails (its check or its draw) fails alone, as a :class:`Failed`, and the call goes on
with the others (issue 38, item 8).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from pymc_manidp.stats import reductions

__all__ = ["Failed", "checked_stack", "dataset_groups", "draw_stack", "release_groups"]


class Failed(NamedTuple):
    """A data set of ``release_many`` whose release raised ``error`` (``n`` records)."""

    error: Exception
    n: int


def dataset_groups(mech, datasets):
    """``([(positions, stack), ...], R)``: the data sets grouped by size, unchecked."""
    shape = tuple(mech.manifold.point_shape)
    if reductions.is_dask(datasets) or (
        isinstance(datasets, (list, tuple)) and any(reductions.is_dask(d) for d in datasets)
    ):
        raise ValueError(
            "release_many takes data sets in memory: release a Dask array with "
            "release(), which reads it in passes"
        )
    if isinstance(datasets, (list, tuple)):
        if not datasets:
            raise ValueError("datasets is empty: nothing to release")
        arrays = [np.asarray(mech.manifold.coerce(d)) for d in datasets]
        for j, a in enumerate(arrays):
            if a.ndim != len(shape) + 1 or a.shape[1:] != shape:
                raise ValueError(
                    f"data set {j} must have shape (n, {', '.join(map(str, shape))}), got {a.shape}"
                )
        sizes = sorted({len(a) for a in arrays})
        groups = []
        for n in sizes:
            pos = [j for j, a in enumerate(arrays) if len(a) == n]
            groups.append((np.array(pos), np.stack([arrays[j] for j in pos])))
        return groups, len(arrays)
    stack = np.asarray(mech.manifold.coerce(datasets))
    if stack.ndim != len(shape) + 2 or stack.shape[2:] != shape:
        raise ValueError(
            f"datasets must be a stack (R, n, {', '.join(map(str, shape))}) or a list of "
            f"data sets (n, {', '.join(map(str, shape))}), got an array of shape "
            f"{stack.shape}"
        )
    if len(stack) == 0:
        raise ValueError("datasets is empty: nothing to release")
    return [(np.arange(len(stack)), stack)], len(stack)


def checked_stack(mech, positions, stack, clip, records):
    """The stack's records checked against the public ball in one pass, end to end.

    Returns ``(kept, flat)``: the indices (into ``stack``) of the data sets that
    pass, and their checked records ``(len(kept) * n, *point_shape)``. A data set
    that fails gets its :class:`Failed` in ``records`` (at its position
    in the call), its message naming it."""
    shape = tuple(mech.manifold.point_shape)
    R, n = stack.shape[:2]
    try:
        return np.arange(R), mech.domain.check(stack.reshape((R * n, *shape)), clip=clip)
    except (ValueError, TypeError):
        pass
    kept = []
    for j, data in enumerate(stack):  # which data sets fail, each named
        try:
            mech.domain.check(data, clip=clip)
            kept.append(j)
        except (ValueError, TypeError) as err:
            where = int(positions[j])
            records[where] = Failed(type(err)(f"data set {where} of release_many: {err}"), n)
    kept = np.array(kept, dtype=int)
    # the others checked again as one stack: the records a call without them checks
    return kept, mech.domain.check(stack[kept].reshape((len(kept) * n, *shape)), clip=clip)


def draw_stack(mech, data, n, sigma, source):
    """``mech.exact_draws_stack``, the values validated: ``[(point, info) or error]``
    per data set. When the stacked draw fails, the random sources are rewound and
    each data set is drawn alone, so that one failing data set fails alone (with
    a seed per data set, the others' values are those of the stacked draw, up to
    rounding)."""
    sources = source if isinstance(source, list) else [source]
    states = [s.bit_generator.state for s in sources]
    try:
        points, infos = mech.exact_draws_stack(data, n, sigma, source)
        if mech.value_on_manifold:  # validated as one array, not value by value
            points = mech.manifold.validate(points)
        return list(zip(points, infos, strict=True))
    except Exception as err:
        if len(data) == n:
            return [err]
    for s, state in zip(sources, states, strict=True):
        s.bit_generator.state = state
    out = []
    for k, start in enumerate(range(0, len(data), n)):
        one = [source[k]] if isinstance(source, list) else source
        out.extend(draw_stack(mech, data[start : start + n], n, sigma, one))
    return out


def release_groups(mech, groups, total, rng, policy, clip, cals, advance) -> list:
    """Check every group, then draw each with its calibration (``cals[n]``, computed
    before the charge): the Releases in input order, a :class:`Failed` for each data
    set that failed."""
    records: list = [None] * total
    per_set = isinstance(rng, list)  # one random source per data set
    fields = {"opt_outs": ("clip",) if clip else (), "notes": ()}
    for positions, stack in groups:
        n = stack.shape[1]
        kept, data = checked_stack(mech, positions, stack, clip, records)
        advance(len(positions) - len(kept))
        if not len(kept):
            continue
        pos = positions[kept]
        cal = cals[n]  # once per n: the same public numbers for each
        source = [rng[j] for j in pos] if per_set else rng
        for j, drawn in zip(pos, draw_stack(mech, data, n, cal.sigma, source), strict=True):
            j = int(j)
            try:
                if isinstance(drawn, Exception):
                    raise drawn
                records[j] = mech._record(
                    drawn[0],
                    cal,
                    "exact",
                    sampler_info=drawn[1],
                    validated=True,
                    seed_policy=policy[j] if per_set else policy,
                    **fields,
                )
            except Exception as err:
                records[j] = Failed(err, n)
        advance(len(pos))
    return records
