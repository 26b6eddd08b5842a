"""How a command line becomes a connection to a name service, in one place for every command
(``nsfleet admin`` and its ``diff`` and ``copy-config``, ``nsfleet simulate``): the options
(``add_connection_options``), the environment variables behind them, and what they make
(``ConnectOptions.from_args``): the HTTP token, the remoting TLS context and the ACL keys, each
honoured wherever its protocol is spoken."""

from __future__ import annotations

import argparse
import os
import ssl
from dataclasses import dataclass
from typing import Any

from nsfleet.client.credentials import ACCESS_KEY_ENV, SECRET_KEY_ENV, TOKEN_ENV, read_secret
from nsfleet.client.remoting import client_tls_context

DEFAULT_TIMEOUT = 5.0
# The options that only the remoting protocol uses (-n), with their attribute names.
REMOTING_ONLY = (("--tls", "tls"), ("--tls-ca-file", "tls_ca_file"),
                 ("--tls-cert-file", "tls_cert_file"), ("--tls-key-file", "tls_key_file"),
                 ("--tls-insecure", "tls_insecure"), ("--access-key", "access_key"),
                 ("--secret-key-file", "secret_key_file"))


def add_connection_options(p: argparse.ArgumentParser | argparse._ArgumentGroup, *,
                           signs_as: str, timeout: float = DEFAULT_TIMEOUT,
                           suppress: bool = False, shown: bool = True) -> None:
    """TLS, signing, token and timeout options, on a parser or one of its argument groups.
    ``signs_as``: who signs (the help text); ``suppress``: leave an option not given unset
    (admin accepts its options before and after the command name, and one level must not reset
    the other); ``shown``: list them in --help (admin lists them once, not per command)."""

    def default(value: Any) -> Any:
        return argparse.SUPPRESS if suppress else value

    def add_argument(*flags: str, help: str, **kwargs: Any) -> None:
        p.add_argument(*flags, help=help if shown else argparse.SUPPRESS, **kwargs)

    add_argument("--tls", action="store_true", default=default(False),
                 help="with -n: speak TLS (a worker with tls-mode permissive or enforcing; "
                      "Java: -Dtls.enable=true)")
    add_argument("--tls-ca-file", default=default(None), metavar="PEM",
                 help="with -n: CA certificates the server's must chain to (default: the "
                      "system's); implies --tls")
    add_argument("--tls-cert-file", default=default(None), metavar="PEM",
                 help="with -n: client certificate, for tls-client-auth; implies --tls")
    add_argument("--tls-key-file", default=default(None), metavar="PEM",
                 help="with -n: the client certificate's private key")
    add_argument("--tls-insecure", action="store_true", default=default(False),
                 help="with -n: do not verify the server's certificate (tests only; "
                      "Java's tls.test.mode.enable); implies --tls")
    add_argument("--access-key", default=default(None), metavar="AK",
                 help=f"with -n: sign {signs_as} as this account (env {ACCESS_KEY_ENV})")
    add_argument("--secret-key-file", default=default(None), metavar="FILE",
                 help=f"with -n: the account's secret key (env {SECRET_KEY_ENV} holds the "
                      "key itself)")
    add_argument("--token-file", default=default(None), metavar="FILE",
                 help=f"HTTP bearer token for workers with tokens on (env {TOKEN_ENV} holds "
                      "the token itself)")
    add_argument("--timeout", type=float, default=default(timeout), metavar="S",
                 help=f"seconds per request and worker (default {timeout:g})")


def is_http(spec: str) -> bool:
    """A side given as a worker's HTTP URL (else remoting ``host:port`` addresses)."""
    return spec.strip().lower().startswith(("http://", "https://"))


def remoting_options_given(args: argparse.Namespace) -> list[str]:
    """The remoting-only options given on the command line, by flag."""
    return [flag for flag, name in REMOTING_ONLY if getattr(args, name, None)]


@dataclass(frozen=True)
class ConnectOptions:
    timeout: float = DEFAULT_TIMEOUT
    token: str | None = None  # HTTP bearer token
    tls: ssl.SSLContext | None = None  # remoting TLS
    access_key: str | None = None  # remoting ACL signing
    secret_key: str | None = None

    @property
    def credentials(self) -> tuple[str, str] | None:
        return (self.access_key, self.secret_key) if self.access_key and self.secret_key else None

    @classmethod
    def from_args(cls, args: argparse.Namespace,
                  default_timeout: float = DEFAULT_TIMEOUT) -> ConnectOptions:
        """The options of ``add_connection_options`` (given or not), the environment behind
        them, and the files they name (ValueError naming the option that cannot be read)."""
        ca, cert = getattr(args, "tls_ca_file", None), getattr(args, "tls_cert_file", None)
        insecure = bool(getattr(args, "tls_insecure", False))
        tls = None
        if getattr(args, "tls", False) or ca or cert or insecure:  # any --tls* turns TLS on
            tls = client_tls_context(ca or "", cert or "", getattr(args, "tls_key_file", "")
                                     or "", verify=not insecure)
        access_key = getattr(args, "access_key", None) or os.environ.get(ACCESS_KEY_ENV) or None
        secret_file = getattr(args, "secret_key_file", None)
        secret_key = read_secret(secret_file, "--secret-key-file", SECRET_KEY_ENV)
        if (access_key or secret_file) and not (access_key and secret_key):
            raise ValueError("signing needs both --access-key and --secret-key-file (or "
                             f"{ACCESS_KEY_ENV} and {SECRET_KEY_ENV})")
        return cls(timeout=getattr(args, "timeout", default_timeout),
                   token=read_secret(getattr(args, "token_file", None), "--token-file",
                                     TOKEN_ENV),
                   tls=tls, access_key=access_key if secret_key else None,
                   secret_key=secret_key if access_key else None)
