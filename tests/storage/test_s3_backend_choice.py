"""Which backend serves an s3:// URL (``storage.s3_backend``) and how s3fs-style options
become obstore's (``storage.obstore_options``): no server needed, nothing is sent."""

from __future__ import annotations

from datetime import timedelta

import pytest

from chunkstore.storage.obstore import setup as obstore_setup
from chunkstore.storage.obstore.options import (
    credentials_refusal,
    translate_options,
    untranslatable,
)
from chunkstore.storage.s3_backend import BACKEND_VARIABLE, choose, is_fallback, is_plain_s3

KEYS = {"key": "k", "secret": "s"}
#: an S3-compatible server: no region needed
SERVER = {**KEYS, "endpoint_url": "http://127.0.0.1:9000"}


@pytest.fixture(autouse=True)
def clean_environment(monkeypatch, tmp_path):
    """No credentials, region, profile or backend from the machine running the tests."""
    for name in ("AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN",
                 "AWS_PROFILE", "AWS_DEFAULT_PROFILE", "AWS_REGION", "AWS_DEFAULT_REGION",
                 "AWS_WEB_IDENTITY_TOKEN_FILE", "AWS_CONTAINER_CREDENTIALS_RELATIVE_URI",
                 "AWS_CONTAINER_CREDENTIALS_FULL_URI", BACKEND_VARIABLE, "AWS_ENDPOINT",
                 "AWS_ENDPOINT_URL", "AWS_ENDPOINT_URL_S3", "CHUNKSTORE_S3_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-credentials"))
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-config"))


def test_plain_s3_urls_and_their_aliases():
    assert is_plain_s3("s3://b/x") and is_plain_s3("s3a://b/x") and is_plain_s3("s3n://b")
    assert not is_plain_s3("zip::s3://b/x.zip") and not is_plain_s3("simplecache::s3://b")
    assert not is_plain_s3("gs://b/x") and not is_plain_s3("memory://x")


@pytest.mark.skipif(not obstore_setup.available(), reason="obstore is not installed")
def test_choice_in_order(monkeypatch):
    backend, why = choose("s3://b/x", SERVER)
    assert backend == "obstore" and "default" in why and not is_fallback(why)
    assert choose("s3a://b/x", {"anon": True, "region": "eu-west-1"})[0] == "obstore"
    assert choose("gs://b/x", {})[0] == "fsspec"
    assert choose("zip::s3://b/x.zip", SERVER)[0] == "fsspec"
    backend, why = choose("s3://b/x", {**SERVER, "profile": "dev"})
    assert backend == "fsspec" and "'profile'" in why and is_fallback(why)
    backend, why = choose("s3://b/x//y", SERVER)
    assert backend == "fsspec" and "'//'" in why and is_fallback(why)
    assert choose("s3://b/x/y/", SERVER)[0] == "obstore"
    backend, why = choose("s3://b/x", SERVER, requested="FSSPEC")
    assert backend == "fsspec" and not is_fallback(why)
    monkeypatch.setenv(BACKEND_VARIABLE, "fsspec")
    backend, why = choose("s3://b/x", SERVER)
    assert backend == "fsspec" and BACKEND_VARIABLE in why
    assert choose("s3://b/x", SERVER, requested="obstore")[0] == "obstore"
    monkeypatch.setattr(obstore_setup, "available", lambda: False)
    monkeypatch.delenv(BACKEND_VARIABLE)
    assert choose("s3://b/x", SERVER) == ("fsspec", "obstore is not installed")


@pytest.mark.skipif(not obstore_setup.available(), reason="obstore is not installed")
def test_aws_without_a_region_falls_back(monkeypatch, tmp_path):
    """obstore does not look a bucket's region up (s3fs follows S3's redirect): on AWS
    itself, some region must be known."""
    backend, why = choose("s3://b/x", KEYS)
    assert backend == "fsspec" and "region" in why and is_fallback(why)
    for options in ({**KEYS, "region": "eu-west-1"},
                    {**KEYS, "client_kwargs": {"region_name": "eu-west-1"}},
                    {**KEYS, "config": {"AWS_REGION": "eu-west-1"}}):
        assert choose("s3://b/x", options)[0] == "obstore", options
    monkeypatch.setenv("AWS_ENDPOINT_URL", "http://minio:9000")  # not AWS: no region needed
    assert choose("s3://b/x", KEYS)[0] == "obstore"
    monkeypatch.delenv("AWS_ENDPOINT_URL")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-west-1")
    assert choose("s3://b/x", KEYS)[0] == "obstore"
    monkeypatch.delenv("AWS_DEFAULT_REGION")
    (tmp_path / "config").write_text("[default]\nregion = eu-west-1\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    assert choose("s3://b/x", KEYS)[0] == "obstore"


def test_untranslatable_options_are_named():
    assert untranslatable({**KEYS, "anon": False, "client_kwargs": {"endpoint_url": "x",
                                                                   "region_name": "r"},
                           "use_listings_cache": False, "default_block_size": 2**20,
                           "version_aware": False, "s3_additional_kwargs": {}}) == []
    assert untranslatable({"version_aware": True, "profile": "p"}) == ["version_aware",
                                                                       "profile"]
    assert untranslatable({"client_kwargs": {"verify": "/etc/ca.pem", "config": 1}}) == [
        "client_kwargs verify", "client_kwargs config"]
    assert untranslatable({"config_kwargs": {"signature_version": "s3", "proxies": {"h": 1},
                                             "s3": {"use_accelerate_endpoint": True}}}) == [
        "config_kwargs signature_version='s3'", "config_kwargs proxies",
        "config_kwargs s3 use_accelerate_endpoint=True"]


def test_translation_of_s3fs_options():
    _, _, kwargs = translate_options("s3://b/p/q/", {
        "username": "k", "password": "s", "token": "t", "requester_pays": True,
        "client_kwargs": {"endpoint_url": "https://minio:9000", "verify": False},
        "config_kwargs": {"connect_timeout": 3, "retries": {"max_attempts": 7},
                          "s3": {"addressing_style": "virtual"}, "region_name": "eu-west-3",
                          "read_timeout": 60}})
    config, client, retry = kwargs["config"], kwargs["client_options"], kwargs["retry_config"]
    # given credentials are pinned (a static provider): the environment's cannot join them
    assert not {"access_key_id", "secret_access_key", "session_token"} & set(config)
    assert kwargs["credential_provider"]() == {"access_key_id": "k", "secret_access_key": "s",
                                               "token": "t", "expires_at": None}
    assert "'s'" not in repr(kwargs["credential_provider"])  # the secret is not shown
    assert config["request_payer"] is True
    assert config["aws_endpoint_url_s3"] == "https://minio:9000"
    assert config["virtual_hosted_style_request"] is True and config["region"] == "eu-west-3"
    assert client["allow_invalid_certificates"] is True and client["connect_timeout"] == "3.0s"
    assert "allow_http" not in client and client["timeout"] == "300s"
    assert retry["max_retries"] == 7 and retry["retry_timeout"] == timedelta(seconds=20)
    _, _, unsigned = translate_options("s3://b", {"config_kwargs": {
        "signature_version": "UNSIGNED"}})
    assert unsigned["config"]["skip_signature"] is True
    with pytest.raises(TypeError, match="'profile'"):
        translate_options("s3://b", {"profile": "p"})


def test_region_from_the_aws_config_file(tmp_path, monkeypatch):
    assert translate_options("s3://b", KEYS)[2]["config"]["region"] == "us-east-1"
    (tmp_path / "config").write_text("[default]\nregion = ap-south-1\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    assert translate_options("s3://b", KEYS)[2]["config"]["region"] == "ap-south-1"
    assert translate_options("s3://b", {**KEYS, "client_kwargs": {"region_name": "x-1"}}
                             )[2]["config"]["region"] == "x-1"
    monkeypatch.setenv("AWS_DEFAULT_REGION", "eu-north-1")  # obstore reads it itself
    assert "region" not in translate_options("s3://b", KEYS)[2]["config"]


def test_credentials_botocore_alone_would_find(tmp_path, monkeypatch):
    assert credentials_refusal({}) is None  # none anywhere: obstore asks the instance
    (tmp_path / "config").write_text("[profile dev]\nregion = x\n[default]\n"
                                     "credential_process = /bin/creds\n")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "config"))
    assert "config file" in credentials_refusal({})
    assert credentials_refusal(KEYS) is None and credentials_refusal({"anon": True}) is None
    assert credentials_refusal({"config": {"AWS_ACCESS_KEY_ID": "k"}}) is None
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "k")
    assert credentials_refusal({}) is None
    monkeypatch.setenv("AWS_PROFILE", "dev")
    assert credentials_refusal({}) is None  # botocore too takes the variables first
    monkeypatch.delenv("AWS_ACCESS_KEY_ID")
    assert "AWS_PROFILE='dev'" in credentials_refusal({})
    monkeypatch.delenv("AWS_PROFILE")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "none"))
    (tmp_path / "credentials").write_text("[default]\naws_access_key_id = k\n")
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "credentials"))
    assert "credentials file" in credentials_refusal({})
