"""Command line ``pymc-manidp`` (a step of its split: the commands moved as they were)."""

from pymc_manidp.cli import commands as _commands
from pymc_manidp.cli.commands import *  # noqa: F403
from pymc_manidp.cli.commands import __all__  # noqa: F401


def __getattr__(name):
    return getattr(_commands, name)
