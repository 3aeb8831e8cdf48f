"""Errors in the command line's words: one line, each Python keyword named as its option
(``random_seed=`` is ``--seed``), so a refusal says which option to change."""

from __future__ import annotations

import contextlib
import re


def _one_line(err) -> str:
    return " ".join(str(err).split()) or type(err).__name__  # one line, whatever the message


#: Python keyword arguments whose option has another name; a keyword named like an
#: option (``delta``, ``estimate_delta``, ``t_max``) is that option (``_keyword_options``)
KEYWORD_OPTIONS = {"random_seed": "--seed", "plan": "--budget-plan", "budget": "--budget"}
#: ... in the errors of a ledger's own budget (``new_state``, ``open_ledger``), where
#: ``epsilon`` and ``delta`` are the ledger's, not the release's
LEDGER_KEYWORD_OPTIONS = {"epsilon": "--budget-epsilon", "delta": "--budget-delta"}


def _keyword_options(command_parser, extra=None) -> dict[str, tuple[str, str]]:
    """Python keyword -> (its option, the option's value placeholder) for one command."""
    options = {}
    for action in command_parser.options:
        if action.option_strings and action.dest != "help":
            value = "" if action.nargs == 0 else (action.metavar or action.dest.upper())
            options[action.dest] = (action.option_strings[-1], value)
    by_option = {opt: value for opt, value in options.values()}
    for keyword, opt in {**KEYWORD_OPTIONS, **(extra or {})}.items():
        if opt in by_option:  # only the options this command has
            options[keyword] = (opt, by_option[opt])
    return options


def _speak_cli(message: str, options: dict[str, tuple[str, str]]) -> str:
    """``message`` with the Python keyword arguments it names as the command's options.

    The library's errors are written for Python (``pass estimate_delta=True``,
    ``sampler='exact'``, ``draws must be``); the command line shows the same message with
    ``--estimate-delta``, ``--sampler exact``, ``--draws must be`` (issue 38 item 10).
    Translated: ``name=value`` (a flag's ``True`` drops), ``name must`` at the start of a
    sentence, ``name[i]`` items of a list option, ``a/b`` pairs, and names with an
    underscore wherever they stand; a plain word in prose ("more chains", "a larger
    epsilon") is left alone.
    """
    if not options:
        return message
    # a Python object's repr or call (Sphere(dim=2, radius=1.0), KNGMechanism(...,
    # max_attempts=...)) is Python, and says so: kept as it is
    calls = re.findall(r"\b[A-Z]\w*\([^()]*\)", message)
    for i, call in enumerate(calls):
        message = message.replace(call, f"\0{i}\0", 1)
    message = _translate(message, options)
    for i, call in enumerate(calls):
        message = message.replace(f"\0{i}\0", call, 1)
    return message


def _translate(message: str, options: dict[str, tuple[str, str]]) -> str:
    """:func:`_speak_cli`'s substitutions, outside Python calls."""
    quotes = "'\""
    names = "|".join(sorted(map(re.escape, options), key=len, reverse=True))
    head = r"(?<![\w.\-\[])"  # not part of a longer name, a field (budget.plan) or an item

    def assigned(m):
        opt, placeholder = options[m["name"]]
        value = m["value"]
        if value is None or value in ("True", "..."):
            return opt
        if value.startswith("["):  # a Python list: the option's own format
            return f"{opt} {placeholder}".rstrip()
        return f"{opt} {value.strip(quotes)}"

    value = r"True\b|\.\.\.|'[^']*'|\"[^\"]*\"|\[[^\]]*\]|[-+]?\d[\w.+-]*"
    message = re.sub(rf"{head}(?P<name>{names})=(?P<value>{value})?", assigned, message)
    message = re.sub(
        rf"{head}(?P<name>{names})\[(?P<i>\d+)\]",
        lambda m: f"{options[m['name']][0]} item {int(m['i']) + 1}",
        message,
    )
    message = re.sub(
        rf"(?:^|(?<=[:;.] )){head}(?P<name>{names})(?= must\b)",
        lambda m: options[m["name"]][0],
        message,
    )
    message = re.sub(
        rf"{head}(?P<a>{names})/(?P<b>{names})\b",
        lambda m: f"{options[m['a']][0]}/{options[m['b']][0]}",
        message,
    )
    underscored = "|".join(re.escape(k) for k in options if "_" in k)
    if underscored:
        message = re.sub(rf"{head}\b({underscored})\b", lambda m: options[m[1]][0], message)
    return message


@contextlib.contextmanager
def _ledger_keywords():
    """Errors raised inside name the ledger's budget: ``epsilon`` is ``--budget-epsilon``."""
    try:
        yield
    except Exception as err:
        if not hasattr(err, "cli_keywords"):
            err.cli_keywords = LEDGER_KEYWORD_OPTIONS
        raise


def _error_line(err, command_parser) -> str:
    """The one line printed for ``err``: the message, in the command's options."""
    extra = getattr(err, "cli_keywords", None)
    return _speak_cli(_one_line(err), _keyword_options(command_parser, extra))
