"""Server configuration: command-line options override environment variables override defaults.

Every option has an environment variable (``WIP_`` prefix), so ``gunicorn app:server``
(which has no options of ours) is configured the same way as ``python app.py``.
"""

from __future__ import annotations

import argparse
import os
import re
import secrets
from dataclasses import dataclass, fields
from pathlib import Path

from .object_store import parse_url

_TRUE = {"1", "true", "yes", "on"}


@dataclass(frozen=True)
class Config:
    host: str = "127.0.0.1"
    port: int = 8050
    cache_dir: str = ".wip-cache"  # results, uploads, background jobs (this machine's workers)
    cache_size_mb: int = 2048  # disk-cache size limit; least recently used entries go first
    upload_limit_mb: int = 200  # per file, enforced while streaming
    upload_ttl_hours: float = 24.0  # uploaded files are deleted after this long
    max_rows: int = 1_000_000  # rows a data set may hold (uploads and the operator's --data)
    allow_pickle: bool = False  # trust pickle/joblib model files (they execute code)
    allow_user_types: bool = False  # let users accept skops types off the allow-list (can run code)
    secret_key: str = ""  # signs background-job handles; random if empty
    max_curves: int = 1000  # observations explained per feature profile
    grid_budget: int = 300_000  # max n_obs x n_grid rows per feature for the observed grid
    n_jobs: int = 1  # threads per model call inside a background job
    warm: bool = True  # compute the default demo at start-up (python app.py)
    celery_broker: str = ""  # e.g. redis://host:6379/0: background jobs on Celery workers
    object_store: str = ""  # with celery_broker: s3://bucket/prefix?endpoint=...: large values kept there
    requeue_after: float = 60.0  # seconds after which a job whose Celery worker vanished goes to another
    upload_per_minute: int = 30  # uploads per client and minute
    upload_mb_per_hour: int = 2000  # MiB per client and hour
    upload_disk_mb: int = 4096  # all uploads not yet loaded, oldest evicted first
    trusted_proxies: int = 0  # reverse proxies whose X-Forwarded-For names the client
    load_timeout: float = 120.0  # seconds per file check or model load (isolated process)
    job_timeout: float = 1800.0  # seconds per background computation (isolated process)
    job_memory_mb: int = 4096  # address space each isolated process may map beyond the worker it forks from
    results_mb_per_hour: int = 0  # result-cache MiB one client's computations may add per hour (0: a quarter)
    jobs_per_client: int = 3  # computations and loads one client runs (or has waiting) at once
    max_jobs: int = 0  # computations and loads running at once in all (0: twice the CPU cores)
    url_prefix: str = "/"  # the path the page is served under (behind a reverse proxy's location)
    debug: bool = False

    def __post_init__(self) -> None:
        object.__setattr__(self, "url_prefix", url_prefix(self.url_prefix))
        if self.max_rows < 1:
            raise ValueError(f"--max-rows ({env_name('max_rows')}) must be at least 1 (got {self.max_rows}).")
        if self.object_store:
            parse_url(self.object_store)  # ValueError with the reason
            if not self.celery_broker:
                raise ValueError(
                    "--object-store (WIP_OBJECT_STORE) needs --celery-broker: it is where machines that "
                    "share only the broker keep the large values"
                )

    @property
    def job_slots(self) -> int:
        """Computations and loads that may run at once (``max_jobs``, or twice the cores)."""
        return self.max_jobs if self.max_jobs > 0 else 2 * (os.cpu_count() or 1)

    @property
    def client_results_bytes(self) -> int:
        """Result bytes one client's computations may add per hour."""
        mb = self.results_mb_per_hour if self.results_mb_per_hour > 0 else max(1, self.cache_size_mb // 4)
        return mb * 2**20

    @property
    def cache_path(self) -> Path:
        return Path(self.cache_dir).resolve()


_HELP = {
    "host": "interface to listen on",
    "port": "port to listen on",
    "cache_dir": "folder for results, uploads and background jobs of the workers of this machine (with "
    "--celery-broker each machine keeps its own: results and files travel through the broker)",
    "cache_size_mb": "size limit of the result cache in MiB",
    "upload_limit_mb": "largest accepted upload in MiB",
    "upload_ttl_hours": "hours an uploaded file is kept",
    "max_rows": "most rows a data set may hold (an upload, or the data set of --data); a Parquet data set "
    "may also take at most 4 x --upload-limit-mb in memory",
    "allow_pickle": "accept pickle/joblib model files: they EXECUTE CODE when loaded; only for files you trust",
    "allow_user_types": "let users accept skops types that are not on the allow-list: such types CAN RUN "
    "CODE; only for users you trust",
    "secret_key": "signs background-job handles, and the results and files machines exchange through the "
    "broker; workers sharing a cache folder share the key kept there (required with --celery-broker)",
    "max_curves": "observations explained per feature (ICI/ICE curves)",
    "grid_budget": "largest n_obs x n_grid per feature before the observed grid becomes a quantile grid",
    "n_jobs": "threads per model call inside a background job",
    "warm": "compute the default demo at start-up",
    "celery_broker": "run background jobs on Celery workers through this Redis broker (redis://...) instead "
    "of forked children of the web workers; web and compute machines then share only the broker",
    "object_store": "with --celery-broker: keep results, uploads, data and model files and workspace records in "
    "this S3-compatible object store instead of Redis, e.g. s3://bucket/prefix?endpoint=http://host:9000 "
    "(credentials: the AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY environment variables)",
    "requeue_after": "with --celery-broker: seconds after which a job whose worker vanished (killed, its "
    "machine gone) is handed to another worker; a job running longer may also be started on a second one",
    "upload_per_minute": "uploads one client (address) may make per minute",
    "upload_mb_per_hour": "MiB one client (address) may upload per hour",
    "upload_disk_mb": "disk space (MiB) for uploads not yet loaded; the oldest are deleted first",
    "trusted_proxies": "number of reverse proxies in front of the server whose X-Forwarded-For names the client",
    "load_timeout": "seconds a data-file check or model load may take before it is stopped",
    "job_timeout": "seconds one background computation may take before it is stopped",
    "job_memory_mb": "memory (address space, MiB) each process that reads a file or runs a model may add to "
    "what it starts with",
    "results_mb_per_hour": "MiB of new results one client's computations may add to the result cache per hour "
    "(0: a quarter of --cache-size-mb)",
    "jobs_per_client": "computations and loads one client (address) may have running or waiting at once",
    "max_jobs": "computations and loads running at once on this server; more wait their turn (0: twice the CPU cores)",
    "url_prefix": "path every route, asset, callback, upload and download is served under, e.g. /tools/why/ "
    "behind a reverse proxy that forwards that location unchanged",
    "debug": "Dash debug mode on Flask's development server instead of gunicorn (never in production)",
}


_PREFIX = re.compile(r"/(?:[A-Za-z0-9._~-]+/)*")


def url_prefix(raw: str) -> str:
    """The URL prefix as Dash wants it: starting and ending with "/" ("tools/why" is
    "/tools/why/"); only letters, digits, ``. _ ~ -`` between slashes, no "." or ".." part."""
    text = "/" + str(raw).strip().strip("/") + "/" if str(raw).strip("/ ") else "/"
    parts = text.strip("/").split("/")
    if not _PREFIX.fullmatch(text) or any(part in (".", "..") for part in parts):
        raise ValueError(
            f"The URL prefix (--url-prefix, {env_name('url_prefix')}) must be a path such as /tools/why/: letters, "
            f"digits and . _ ~ - between slashes (got {str(raw)[:80]!r})."
        )
    return text


def env_name(name: str) -> str:
    return "WIP_" + name.upper()


def _convert(kind, raw: str, name: str):
    if kind is bool:
        return raw.strip().lower() in _TRUE
    try:
        return kind(raw)
    except ValueError as exc:
        raise SystemExit(f"Environment variable {env_name(name)} must be {kind.__name__} (got {raw!r}).") from exc


def from_env(environ=None, *, with_secret: bool = True) -> Config:
    """Defaults overridden by ``WIP_*`` environment variables."""
    environ = os.environ if environ is None else environ
    values = {}
    for f in fields(Config):
        raw = environ.get(env_name(f.name))
        if raw is not None:
            values[f.name] = _convert(type(getattr(Config, f.name)), raw, f.name)
    config = _config(values)
    if with_secret and config.celery_broker and not config.secret_key:
        raise SystemExit(_BROKER_NEEDS_KEY)
    if with_secret and not config.secret_key:
        # Several workers need one key: derive a stable one from a file in the cache folder.
        values["secret_key"] = _shared_secret(config.cache_path)
        config = Config(**values)
    return config


def parse_args(argv=None, environ=None, *, parents=(), epilog: str | None = None) -> Config:
    """Command-line options; each defaults to its environment variable, then to the built-in.
    ``parents``: parsers of options the caller reads itself (app.py's data set), listed in
    ``--help`` with these; ``epilog``: the help's last words (the subcommands)."""
    base = from_env(environ, with_secret=False)
    parser = argparse.ArgumentParser(
        description="Why it performs: feature-importance dashboard.",
        parents=list(parents),
        epilog=epilog,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    for f in fields(Config):
        flag = "--" + f.name.replace("_", "-")
        default = getattr(base, f.name)
        shown = (
            "random, kept in the cache folder"
            if f.name == "secret_key" and not default
            else ("(set)" if f.name == "secret_key" else repr(default))
        )
        help_text = f"{_HELP[f.name]} (env {env_name(f.name)}; default {shown})"
        if isinstance(default, bool):
            parser.add_argument(flag, action=argparse.BooleanOptionalAction, default=default, help=help_text)
        else:
            parser.add_argument(flag, type=type(default), default=default, help=help_text)
    known = {f.name for f in fields(Config)}
    args = {k: v for k, v in vars(parser.parse_args(argv)).items() if k in known}  # the parents' are the caller's
    if args["celery_broker"] and not args["secret_key"]:
        parser.error(_BROKER_NEEDS_KEY)
    if not args["secret_key"]:  # one key per cache folder, shared by the workers using it
        args["secret_key"] = _shared_secret(Path(args["cache_dir"]).resolve())
    return _config(args)


_BROKER_NEEDS_KEY = (
    "--celery-broker needs --secret-key (or WIP_SECRET_KEY): the same key on every web and compute "
    "machine; it signs the results, files and job records they exchange through the broker"
)


def _config(values: dict) -> Config:
    """The configuration of these values; a value it refuses ends the program with its reason."""
    try:
        return Config(**values)
    except ValueError as exc:
        raise SystemExit(f"error: {exc}") from None


def _shared_secret(cache_path: Path) -> str:
    """One random key per cache folder, created atomically (write a temp file, then link)."""
    cache_path.mkdir(parents=True, exist_ok=True)
    key_file = cache_path / "secret_key"
    if not key_file.exists():
        tmp = cache_path / f".secret_key.{secrets.token_hex(8)}"
        tmp.write_text(secrets.token_hex(32))
        os.chmod(tmp, 0o600)
        try:
            os.link(tmp, key_file)
        except FileExistsError:
            pass
        finally:
            tmp.unlink()
    return key_file.read_text().strip()
