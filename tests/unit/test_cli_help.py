"""Every ``--help`` of the command line is plain text for a terminal: no reST or Sphinx markup,
serve's flags in named sections, admin's connection options listed once, every positional
argument explained, and no abbreviated flag taken for a longer one (issue 40)."""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from dataclasses import fields

import pytest

from nsfleet import config
from nsfleet.cli import build_parser, main

MARKUP = re.compile(r"``|:(mod|class|func|meth|attr|data|exc|ref):`")
CONNECTION_FLAGS = ("--server", "--namesrv-addr", "--tls", "--tls-ca-file", "--tls-cert-file",
                    "--tls-key-file", "--tls-insecure", "--access-key", "--secret-key-file",
                    "--token-file", "--timeout")


def _commands(parser: argparse.ArgumentParser,
              path: tuple[str, ...] = ()) -> Iterator[tuple[tuple[str, ...],
                                                            argparse.ArgumentParser]]:
    """Every parser of the tree with the words that reach it (``()``: the top level)."""
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _commands(sub, (*path, name))


PARSERS = dict(_commands(build_parser()))


@pytest.mark.parametrize("path", sorted(PARSERS), ids=lambda p: " ".join(p) or "nsfleet")
def test_help_is_plain_text_and_explains_every_positional(path: tuple[str, ...]) -> None:
    parser = PARSERS[path]
    text = parser.format_help()
    assert not MARKUP.search(text), text
    assert not parser.allow_abbrev
    unexplained = [a.dest for a in parser._actions
                   if not a.option_strings and not isinstance(a, argparse._SubParsersAction)
                   and not a.help]
    assert unexplained == []


def test_each_help_runs(capsys: pytest.CaptureFixture[str]) -> None:
    for path in (("--help",), ("serve", "--help"), ("admin", "--help"),
                 ("admin", "diff", "--help"), ("simulate", "--help"), ("analytics", "--help")):
        with pytest.raises(SystemExit) as done:
            main(list(path))
        assert done.value.code == 0
        assert not MARKUP.search(capsys.readouterr().out)


def test_every_setting_is_in_exactly_one_named_section() -> None:
    assert set(config.GROUP) == {f.name for f in fields(config.Settings)}
    assert set(config.GROUP.values()) <= set(config.GROUP_TITLES)


def test_serve_flags_are_in_named_sections() -> None:
    serve = PARSERS[("serve",)]
    catch_all = [g for g in serve._action_groups if g.title in ("options", "optional arguments")]
    (options,) = catch_all
    assert [a.dest for a in options._group_actions] == ["help"]
    sections = [g.title for g in serve._action_groups if g._group_actions and g not in catch_all
                and g.title != "positional arguments"]
    assert sections == list(config.GROUP_TITLES)
    text = serve.format_help()
    for title in config.GROUP_TITLES:
        assert f"\n{title}:\n" in text


def _listed(text: str, flag: str) -> int:
    """How many times ``flag`` is explained (a help line starting with it), usage aside."""
    return len(re.findall(rf"^\s+(?:-\w, )?{re.escape(flag)}(?=[ ,\n])", text, re.MULTILINE))


def test_admin_connection_options_are_listed_once() -> None:
    admin = PARSERS[("admin",)].format_help()
    for flag in CONNECTION_FLAGS:
        assert _listed(admin, flag) == 1, flag
    for path, parser in PARSERS.items():
        if path[:1] == ("admin",) and len(path) > 1:
            shown = [a.option_strings for a in parser._actions
                     if set(a.option_strings) & set(CONNECTION_FLAGS)
                     and a.help != argparse.SUPPRESS]
            assert shown == [], path
            # Named in one line, with where they are explained.
            assert "nsfleet admin --help" in parser.format_help(), path


@pytest.mark.parametrize("argv", [
    ["admin", "--server", "http://127.0.0.1:1", "--timeout", "1", "--json", "topic-route", "T"],
    ["admin", "topic-route", "T", "--server", "http://127.0.0.1:1", "--timeout", "1", "--json"],
    ["admin", "kv", "get", "NS", "k", "-n", "127.0.0.1:1", "--tls", "--timeout", "1"],
    ["admin", "address-server", "add", "10.0.0.1:9876", "--token-file", "/t"],
    ["admin", "diff", "127.0.0.1:1", "http://127.0.0.1:2", "--settle", "0", "--tls-insecure"],
])
def test_admin_options_still_go_before_or_after_the_command(argv: list[str]) -> None:
    args = build_parser().parse_args(argv)
    given = {a.lstrip("-").replace("-", "_") for a in argv if a.startswith("--")}
    assert given <= set(vars(args))
    assert "--timeout" not in argv or args.timeout == 1


@pytest.mark.parametrize(("argv", "flag"), [
    (["simulate", "--broker", "3"], "--broker"),
    (["serve", "--http", "1"], "--http"),
    (["admin", "cluster-list", "--serv", "http://x"], "--serv"),
    (["admin", "changes", "--lim", "3"], "--lim"),
    (["analytics", "--name", "x"], "--name"),
])
def test_an_abbreviated_flag_is_refused(argv: list[str], flag: str,
                                        capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as done:
        build_parser().parse_args(argv)
    assert done.value.code == 2
    assert flag in capsys.readouterr().err
