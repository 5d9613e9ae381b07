"""The store's errors share the package's one root, and keep the bases callers already catch."""

from __future__ import annotations

import pytest

from celery_hashbeat.errors import HashbeatError
from celery_hashbeat.store import (
    StoreAuthError,
    StoreConfigError,
    StoreError,
    StoreUnavailable,
    mask_url,
    open_store,
)


@pytest.mark.parametrize("error", [StoreError, StoreUnavailable, StoreAuthError, StoreConfigError])
def test_every_store_error_is_a_hashbeat_error(error: type[Exception]) -> None:
    assert issubclass(error, HashbeatError)


def test_a_bad_store_url_is_still_a_value_error() -> None:
    with pytest.raises(ValueError, match="hashbeat_store_url") as raised:
        open_store("nosuch://host")
    assert isinstance(raised.value, HashbeatError)


def test_the_store_package_masks_a_urls_password() -> None:
    assert mask_url("redis://beat:s3cret@host:6379/0") == "redis://beat:***@host:6379/0"
    assert mask_url("redis://host:6379/0") == "redis://host:6379/0"
