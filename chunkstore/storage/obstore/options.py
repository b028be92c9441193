"""s3fs-style ``storage_options`` in obstore's terms.

:func:`translate_options` turns the options users give s3fs (and FsspecStore) into the
keyword arguments of obstore's ``S3Store``; :func:`untranslatable` names the options it
cannot express. An ``s3://`` URL whose options all translate is served by obstore when
it is installed (``resolve``); otherwise by fsspec, and the store says why
(``store.backend_reason``).

What translates (s3fs name -> obstore):

* ``key`` / ``username``, ``secret`` / ``password``, ``token`` (also
  ``client_kwargs={"aws_access_key_id": ..., "aws_secret_access_key": ...,
  "aws_session_token": ...}``) -> ``access_key_id``, ``secret_access_key``,
  ``session_token``; ``anon=True`` -> ``skip_signature``;
* ``endpoint_url`` (top level or in ``client_kwargs``, or the environment's, see
  ``fsspec_setup``) -> the endpoint (``obstore.options.effective_endpoint``);
* ``region`` or ``client_kwargs={"region_name": ...}`` (``config_kwargs`` too) ->
  ``region``; with none given anywhere, the ``region`` of the default profile in
  ``~/.aws/config`` (as botocore), else ``us-east-1``;
* ``requester_pays=True`` -> ``request_payer``; ``client_kwargs={"verify": False}`` ->
  ``allow_invalid_certificates``;
* ``config_kwargs``: ``connect_timeout`` -> the client's ``connect_timeout``;
  ``retries={"max_attempts": n}`` -> ``max_retries``; ``s3={"addressing_style":
  "virtual" | "path"}`` -> ``virtual_hosted_style_request``; ``signature_version``
  ``"s3v4"`` (nothing to do) or ``UNSIGNED`` (-> ``skip_signature``); botocore knobs
  with no effect on what is stored are ignored (:data:`_IGNORED_CONFIG`);
* s3fs's own cache and buffer settings are ignored (:data:`_IGNORED`);
* obstore's own sections pass through: ``config``, ``client_options``, ``retry_config``.

Everything else does not translate: ``profile``, ``session``, ``version_aware=True``,
``s3_additional_kwargs``, a botocore ``Config`` object, a CA bundle path in ``verify``...
So do credentials that only botocore would find: a profile named by ``AWS_PROFILE``, or
keys in the shared files (``~/.aws/credentials``, ``~/.aws/config``: keys, SSO,
``credential_process``, roles), which obstore does not read, when no credentials are
given in the options or the environment (obstore reads ``AWS_ACCESS_KEY_ID`` and co.,
web identity and container credentials, and the instance metadata service)
(:func:`credentials_refusal`); and AWS itself (no endpoint) with no region anywhere, since
obstore does not look a bucket's region up (:func:`region_refusal`).
"""

from __future__ import annotations

import configparser
import hashlib
import os
from collections.abc import Mapping
from datetime import timedelta
from typing import Any

from chunkstore.config import environ
from chunkstore.storage.errors import InvalidStoreError
from chunkstore.storage.fsspec.setup import explicit_endpoint, protocols, with_endpoint
from chunkstore.storage.location import canonical_scheme

#: s3fs credential options -> obstore's S3Config keys
_CREDENTIALS = (("key", "access_key_id"), ("username", "access_key_id"),
                ("secret", "secret_access_key"), ("password", "secret_access_key"),
                ("token", "session_token"))
_CLIENT_CREDENTIALS = (("aws_access_key_id", "access_key_id"),
                       ("aws_secret_access_key", "secret_access_key"),
                       ("aws_session_token", "session_token"))
#: s3fs options translated below, and obstore's own sections
_TRANSLATED = {"key", "username", "secret", "password", "token", "anon", "endpoint_url",
               "client_kwargs", "region", "config_kwargs", "requester_pays"}
_NATIVE_KEYS = {"config", "client_options", "retry_config"}
#: s3fs's own caches, buffers and connection settings: nothing to tell obstore
_IGNORED = {"use_ssl", "default_block_size", "default_fill_cache", "default_cache_type",
            "skip_instance_cache", "use_listings_cache", "listings_expiry_time",
            "max_paths", "cache_regions", "fixed_upload_size", "max_concurrency"}
#: s3fs options that are fine when false or empty (their default), and only then
_DEFAULT_ONLY = {"version_aware", "s3_additional_kwargs", "profile", "session",
                 "asynchronous", "loop"}
_CLIENT_KWARGS = {"endpoint_url", "region_name", "verify", "use_ssl",
                  *(k for k, _ in _CLIENT_CREDENTIALS)}
#: botocore Config settings that change nothing obstore stores or reads: pool sizes,
#: the read timeout of one socket read (obstore's own whole-request timeout applies),
#: botocore's checksum policy (obstore sends no checksums), keep-alive
_IGNORED_CONFIG = {"max_pool_connections", "read_timeout", "tcp_keepalive",
                   "request_checksum_calculation", "response_checksum_validation",
                   "parameter_validation", "inject_host_prefix", "user_agent",
                   "user_agent_extra", "user_agent_appid"}
_TRANSLATED_CONFIG = {"connect_timeout", "retries", "s3", "signature_version", "region_name"}
#: spellings of the endpoint in obstore's S3 config (its keys are case-insensitive)
ENDPOINT_KEYS = ("aws_endpoint_url_s3", "endpoint", "aws_endpoint", "aws_endpoint_url",
                 "endpoint_url")
#: environment variables through which obstore finds credentials itself
_OBSTORE_CREDENTIAL_VARIABLES = ("AWS_ACCESS_KEY_ID", "AWS_WEB_IDENTITY_TOKEN_FILE",
                                 "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                                 "AWS_CONTAINER_CREDENTIALS_FULL_URI")
#: keys of a profile through which botocore finds credentials
_PROFILE_CREDENTIALS = ("aws_access_key_id", "credential_process", "role_arn",
                        "sso_session", "sso_start_url", "web_identity_token_file")


def _unsigned(value: Any) -> bool:
    return value is not None and str(value).upper() == "UNSIGNED"


def _config_kwargs_problems(config_kwargs: Mapping[str, Any]) -> list[str]:
    problems = []
    for name, value in config_kwargs.items():
        if name in _IGNORED_CONFIG or (name in _TRANSLATED_CONFIG and name != "s3"):
            if name == "signature_version" and value and not _unsigned(value) and \
                    str(value).lower() not in ("s3v4", "v4"):
                problems.append(f"config_kwargs signature_version={value!r}")
            continue
        if name == "s3":
            for key, setting in dict(value or {}).items():
                if key != "addressing_style" and setting:
                    problems.append(f"config_kwargs s3 {key}={setting!r}")
            continue
        if value:
            problems.append(f"config_kwargs {name}")
    return problems


def untranslatable(options: Mapping[str, Any]) -> list[str]:
    """The s3fs-style ``options`` obstore cannot express (empty: all translate)."""
    problems = []
    for name, value in options.items():
        if name in _TRANSLATED | _NATIVE_KEYS | _IGNORED:
            continue
        if name in _DEFAULT_ONLY and not value:
            continue
        problems.append(name)
    ck = options.get("client_kwargs") or {}
    if not isinstance(ck, Mapping):
        return [*problems, "client_kwargs"]
    for name, value in ck.items():
        if name not in _CLIENT_KWARGS or (name == "verify" and not isinstance(value, bool)
                                          and value is not None):
            problems.append(f"client_kwargs {name}")
    config_kwargs = options.get("config_kwargs") or {}
    if not isinstance(config_kwargs, Mapping):
        return [*problems, "config_kwargs"]
    return problems + _config_kwargs_problems(config_kwargs)


def _aws_file(variable: str, default: str) -> configparser.ConfigParser | None:
    path = environ(variable) or os.path.join("~", ".aws", default)
    path = os.path.expanduser(path)
    if not os.path.isfile(path):
        return None
    parser = configparser.ConfigParser(interpolation=None)
    try:
        parser.read(path, encoding="utf-8")
    except (configparser.Error, OSError, UnicodeError):
        return None
    return parser


def _profile_section(parser: configparser.ConfigParser | None, config_file: bool
                     ) -> Mapping[str, str]:
    if parser is None:
        return {}
    for name in (["profile default", "default"] if config_file else ["default"]):
        if parser.has_section(name):
            return parser[name]
    return {}


def aws_files_region() -> str | None:
    """The ``region`` of the default profile in the AWS config file, if any."""
    section = _profile_section(_aws_file("AWS_CONFIG_FILE", "config"), True)
    return section.get("region") or None


def credentials_refusal(options: Mapping[str, Any]) -> str | None:
    """Why obstore would not find the credentials botocore would (None: it would):
    a profile named by ``AWS_PROFILE``, or credentials only in the AWS shared files."""
    config = {str(k).lower(): v for k, v in (options.get("config") or {}).items()}
    ck = options.get("client_kwargs") or {}
    config_kwargs = options.get("config_kwargs") or {}
    if (options.get("anon") or options.get("key") or options.get("username")
            or ck.get("aws_access_key_id") or _unsigned(config_kwargs.get("signature_version"))
            or config.get("access_key_id") or config.get("aws_access_key_id")
            or config.get("skip_signature") or config.get("aws_skip_signature")):
        return None
    if any(environ(v) for v in _OBSTORE_CREDENTIAL_VARIABLES):
        return None
    profile = environ("AWS_PROFILE") or environ("AWS_DEFAULT_PROFILE")
    if profile:
        return f"AWS_PROFILE={profile!r} names a profile of the AWS config files"
    for variable, name, config_file in (("AWS_SHARED_CREDENTIALS_FILE", "credentials", False),
                                        ("AWS_CONFIG_FILE", "config", True)):
        section = _profile_section(_aws_file(variable, name), config_file)
        if any(section.get(key) for key in _PROFILE_CREDENTIALS):
            return f"the credentials are in the AWS {name} file"
    return None


def region_refusal(url: str, options: Mapping[str, Any]) -> str | None:
    """Why obstore would not reach the bucket (None: it would): no endpoint (AWS itself)
    and no region in the options, the environment or the AWS config file. obstore does
    not look a bucket's region up (s3fs does, following S3's redirect), and would send
    every request to us-east-1."""
    config = {str(k).lower(): v for k, v in (options.get("config") or {}).items()}
    ck = options.get("client_kwargs") or {}
    if (options.get("region") or ck.get("region_name")
            or (options.get("config_kwargs") or {}).get("region_name")
            or any(config.get(k) for k in ("region", "aws_region", "aws_default_region"))
            or environ("AWS_REGION") or environ("AWS_DEFAULT_REGION")):
        return None
    endpoint = effective_endpoint(config, explicit_endpoint(with_endpoint(url, dict(options))))
    if endpoint or aws_files_region():
        return None
    return "no region given (options, AWS_REGION, ~/.aws/config), and obstore does not look " \
           "a bucket's region up as s3fs does"


def effective_endpoint(config: Mapping[str, Any], explicit: str | None) -> str | None:
    """The endpoint an ObstoreStore talks to, fixed when it is created: an endpoint in
    obstore's own ``config`` (any spelling; ``aws_endpoint_url_s3`` first), else the
    s3fs-style one (``explicit``: ``endpoint_url``, or the environment's, see
    ``fsspec_setup``), else the ``AWS_ENDPOINT`` variable, which obstore (not botocore)
    reads. The one chosen is what the client uses: obstore would otherwise let the
    environment's ``AWS_ENDPOINT_URL_S3`` win over a configured endpoint."""
    lower = {str(k).lower(): v for k, v in config.items()}
    for key in ENDPOINT_KEYS:
        if lower.get(key):
            return str(lower[key])
    return explicit or environ("AWS_ENDPOINT") or None


def _apply_config_kwargs(config_kwargs: Mapping[str, Any], config: dict[str, Any],
                         client: dict[str, Any], retry: dict[str, Any]) -> None:
    if config_kwargs.get("connect_timeout") is not None:
        client["connect_timeout"] = f"{float(config_kwargs['connect_timeout'])}s"
    attempts = (config_kwargs.get("retries") or {}).get("max_attempts")
    if attempts is not None:
        retry["max_retries"] = int(attempts)
    style = (config_kwargs.get("s3") or {}).get("addressing_style")
    if style in ("virtual", "path"):
        config.setdefault("virtual_hosted_style_request", style == "virtual")
    if _unsigned(config_kwargs.get("signature_version")):
        config.setdefault("skip_signature", True)
    if config_kwargs.get("region_name"):
        config.setdefault("region", config_kwargs["region_name"])


class StaticCredentials:
    """Credentials given in the options, handed to obstore as its credential provider:
    obstore's own loading would add the environment's ``AWS_SESSION_TOKEN`` to a key
    and secret given without one (botocore signs with exactly what it is given; AWS
    refuses a token of another key). Called once per client (no expiry)."""

    def __init__(self, access_key_id: str, secret_access_key: str,
                 token: str | None) -> None:
        self.access_key_id, self.secret_access_key, self.token = \
            access_key_id, secret_access_key, token

    def __call__(self) -> dict[str, Any]:
        return {"access_key_id": self.access_key_id,
                "secret_access_key": self.secret_access_key, "token": self.token,
                "expires_at": None}

    def __repr__(self) -> str:  # (a client cache key: the secret is not shown, only a digest)
        digest = hashlib.sha256(f"{self.secret_access_key}\0{self.token}".encode()).hexdigest()
        return f"StaticCredentials({self.access_key_id!r}, {digest[:16]})"


def _pin_credentials(config: dict[str, Any], given: Mapping[str, Any]) -> dict[str, Any]:
    """The S3Store keywords for credentials given s3fs-style (``given``: obstore config
    name -> value): a :class:`StaticCredentials` provider when a key and a secret are
    given, so that nothing of the environment's credentials joins them."""
    if not (given.get("access_key_id") and given.get("secret_access_key")):
        for theirs, value in given.items():
            config.setdefault(theirs, value)
        return {}
    return {"credential_provider": StaticCredentials(
        given["access_key_id"], given["secret_access_key"], given.get("session_token"))}


def translate_options(url: str, options: Mapping[str, Any]) -> tuple[str, str, dict[str, Any]]:
    """``(bucket, root prefix, keyword arguments of S3Store)`` from s3fs-style options;
    a TypeError names the options that do not translate."""
    chain = protocols(url)
    if len(chain) != 1 or canonical_scheme(chain[0]) != "s3":
        raise InvalidStoreError(f"{url}: the obstore backend takes plain s3:// URLs only "
                                "(other URLs use fsspec)")
    unknown = untranslatable(options)
    if unknown:
        raise TypeError(f"storage_options {sorted(unknown)} are not understood by the obstore "
                        f"backend (s3fs-style: key, secret, token, anon, endpoint_url, "
                        f"client_kwargs, config_kwargs; obstore's own: config, "
                        f"client_options, retry_config; or backend='fsspec')")
    bucket, _, root = url.split("://", 1)[1].partition("/")
    if not bucket:
        raise InvalidStoreError(f"{url}: no bucket in the URL")
    config: dict[str, Any] = dict(options.get("config") or {})
    client: dict[str, Any] = {"connect_timeout": "10s", "timeout": "300s",
                              "pool_idle_timeout": "60s"}
    retry: dict[str, Any] = {
        "max_retries": 3, "retry_timeout": timedelta(seconds=20),
        "backoff": {"init_backoff": timedelta(milliseconds=50),
                    "max_backoff": timedelta(seconds=2), "base": 2}}
    ck = options.get("client_kwargs") or {}
    credentials: dict[str, Any] = {}
    for ours, theirs in _CREDENTIALS:
        if options.get(ours):
            credentials.setdefault(theirs, options[ours])
    for ours, theirs in _CLIENT_CREDENTIALS:
        if ck.get(ours):
            credentials.setdefault(theirs, ck[ours])
    extra = _pin_credentials(config, credentials)
    if options.get("anon"):
        config.setdefault("skip_signature", True)
    if not any(str(k).lower() in ("request_payer", "aws_request_payer") for k in config):
        # as s3fs: only when asked (not from the environment's AWS_REQUEST_PAYER)
        config["request_payer"] = bool(options.get("requester_pays"))
    if ck.get("verify") is False:
        client.setdefault("allow_invalid_certificates", True)
    _apply_config_kwargs(options.get("config_kwargs") or {}, config, client, retry)
    client.update(options.get("client_options") or {})  # obstore's own settings win
    endpoint = effective_endpoint(config, explicit_endpoint(dict(options)))
    config = {k: v for k, v in config.items() if str(k).lower() not in ENDPOINT_KEYS}
    if endpoint:
        # the key obstore ranks first (even above the environment's AWS_ENDPOINT_URL_S3)
        config["aws_endpoint_url_s3"] = endpoint
        if endpoint.lower().startswith("http://"):
            client.setdefault("allow_http", True)
    region = options.get("region") or ck.get("region_name")
    if region:
        config.setdefault("region", region)
    elif "region" not in config and not (environ("AWS_REGION")
                                         or environ("AWS_DEFAULT_REGION")):
        config["region"] = aws_files_region() or "us-east-1"
    given = options.get("retry_config")
    return bucket, root.strip("/"), {"config": config, "client_options": client,
                                     "retry_config": given if given is not None else retry,
                                     **extra}
