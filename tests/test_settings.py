"""Settings, the lazy banner instance, and the ``-S hashbeat`` alias."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from celery import Celery
from celery.apps.beat import Beat
from celery.beat import Service
from celery.exceptions import ImproperlyConfigured

from celery_hashbeat import Scheduler, spellings
from celery_hashbeat.settings import DEFAULT_STORE_URL, ConfigurationExit, Settings
from celery_hashbeat.spellings import KNOWN_SETTINGS, unread_setting


def settings_of(**conf: Any) -> Settings:
    return Settings.from_conf(Celery("settings", set_as_current=False, config_source=conf).conf)


def test_defaults() -> None:
    settings = settings_of()
    assert settings.store_url == DEFAULT_STORE_URL == "sqlite:///celerybeat-hashbeat.sqlite"
    assert settings.key_prefix == "hashbeat"
    assert settings.lease_ttl == 10 and settings.renew_interval == pytest.approx(10 / 3)
    assert settings.catch_up == "latest" and settings.catch_up_window is None
    # Unless configured, a store call may take at most one renewal period.
    assert settings.store_options == {"timeout": pytest.approx(10 / 3)}


def test_django_spelling_is_found() -> None:
    class DjangoSettings:
        CELERY_HASHBEAT_STORE_URL = "redis://example:6379/3"
        CELERY_HASHBEAT_LEASE_TTL = "6"
        CELERY_HASHBEAT_CATCH_UP = "all"

    app = Celery("django", set_as_current=False)
    app.config_from_object(DjangoSettings, namespace="CELERY")
    settings = Settings.from_conf(app.conf)
    assert settings.store_url == "redis://example:6379/3"
    assert settings.lease_ttl == 6 and settings.renew_interval == 2
    assert settings.catch_up == "all"


def test_store_options_follow_celery_and_redis_py_conventions() -> None:
    settings = settings_of(
        hashbeat_store_url="rediss+sentinel://sentinel:26379/0",
        hashbeat_sentinel_master="mymaster",
        hashbeat_redis_use_ssl={"ssl_cert_reqs": "required", "ssl_ca_certs": "/ca.pem"},
        hashbeat_store_options={"socket_timeout": 1.5},
    )
    assert settings.store_options == {
        "master_name": "mymaster",
        "ssl_cert_reqs": "required",
        "ssl_ca_certs": "/ca.pem",
        "socket_timeout": 1.5,
    }


@pytest.mark.parametrize(
    ("conf", "message"),
    [
        ({"hashbeat_lease_ttl": 0}, "hashbeat_lease_ttl must be a positive number"),
        ({"hashbeat_lease_ttl": "ten"}, "hashbeat_lease_ttl must be a positive number"),
        ({"hashbeat_lease_ttl": True}, "hashbeat_lease_ttl must be a positive number"),
        (
            {"hashbeat_lease_ttl": 5, "hashbeat_lease_renew_interval": 2},
            r"hashbeat_lease_ttl \(5s\) must be at least 3x .*hashbeat_lease_renew_interval",
        ),
        ({"hashbeat_catch_up": "newest"}, "hashbeat_catch_up must be one of 'latest', 'all'"),
        ({"hashbeat_catch_up_window": -1}, "hashbeat_catch_up_window must be a positive"),
        ({"beat_cron_starting_deadline": "soon"}, "beat_cron_starting_deadline must be a"),
        ({"hashbeat_key_prefix": "{p}"}, "hashbeat_key_prefix must be a non-empty string"),
        ({"hashbeat_store_url": 6379}, "hashbeat_store_url must be a URL string"),
        ({"hashbeat_store_options": "fast"}, "hashbeat_store_options must be a dict"),
        ({"hashbeat_redis_use_ssl": True}, "hashbeat_redis_use_ssl must be a dict"),
        ({"hashbeat_store_min_replicas": -1}, "hashbeat_store_min_replicas must be a whole"),
        ({"hashbeat_store_min_replicas": "1"}, "hashbeat_store_min_replicas must be a whole"),
        ({"hashbeat_store_min_replicas": 1}, "min_replicas = 1 needs a Redis store.*sqlite://"),
        (
            {"hashbeat_store_min_replicas": 1, "hashbeat_store_url": "postgresql://h/db"},
            "not supported by the PostgreSQL store: synchronous replication is the server's",
        ),
    ],
)
def test_bad_settings_name_the_setting(conf: dict[str, Any], message: str) -> None:
    with pytest.raises(ImproperlyConfigured, match=message):
        settings_of(**conf)


def test_min_replicas_becomes_the_redis_store_option() -> None:
    settings = settings_of(
        hashbeat_store_url="redis+cluster://redis-1:6379", hashbeat_store_min_replicas=2
    )
    assert settings.store_options["min_replicas"] == 2
    assert "min_replicas" not in settings_of(hashbeat_store_min_replicas=0).store_options


def test_a_malformed_store_url_is_reported_at_start(app: Celery) -> None:
    app.conf.hashbeat_store_url = "mongodb://somewhere"
    with pytest.raises(SystemExit, match=r"^celery_hashbeat: hashbeat_store_url"):
        Scheduler(app)


def test_the_lazy_instance_has_no_side_effects(
    app: Celery, redis_url: str, key_prefix: str
) -> None:
    app.conf.beat_schedule = {"e": {"task": "t", "schedule": 1.0}}
    # A store this instance could not even open: the lazy instance must not try.
    app.conf.hashbeat_store_url = "redis://:secret@127.0.0.1:1/0"
    scheduler = Scheduler(app, lazy=True)
    assert scheduler.entries == {} and not scheduler.is_leader
    assert "127.0.0.1:1" in scheduler.info and "secret" not in scheduler.info
    scheduler.close()
    client = redis.Redis.from_url(redis_url)
    assert client.keys(f"*{key_prefix}*") == []
    client.close()


def test_the_banner_uses_a_lazy_instance_through_the_alias(app: Celery, key_prefix: str) -> None:
    service = Service(app, scheduler_cls="hashbeat")
    lazy = service.get_scheduler(lazy=True)
    assert type(lazy) is Scheduler
    banner = Beat(app=app, scheduler="hashbeat", quiet=True).startup_info(service)
    assert "celery_hashbeat.scheduler.Scheduler" in banner
    assert f"prefix {key_prefix}" in banner


@pytest.fixture
def warnings(caplog: pytest.LogCaptureFixture) -> Iterator[pytest.LogCaptureFixture]:
    """The settings' warnings, with the once-per-process memory emptied before and after."""
    spellings._warned.clear()
    caplog.set_level(logging.WARNING, logger="celery_hashbeat.settings")
    yield caplog
    spellings._warned.clear()


def warned(caplog: pytest.LogCaptureFixture) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.name == "celery_hashbeat.settings"]


def django_app(**settings: Any) -> Celery:
    app = Celery("django", set_as_current=False)
    app.config_from_object(type("DjangoSettings", (), settings), namespace="CELERY")
    return app


def test_a_mistyped_setting_is_warned_about_once_with_the_closest_one(
    warnings: pytest.LogCaptureFixture,
) -> None:
    app = Celery("typo", set_as_current=False, config_source={"hashbeat_lease_tll": 3})
    Settings.from_conf(app.conf)
    Settings.from_conf(app.conf)  # Celery builds the scheduler twice: still one warning
    assert warned(warnings) == [
        "celery_hashbeat: setting hashbeat_lease_tll is not a celery_hashbeat setting and is "
        "ignored: did you mean hashbeat_lease_ttl?"
    ]


def test_the_banner_instance_does_not_warn(warnings: pytest.LogCaptureFixture) -> None:
    app = Celery("typo", set_as_current=False, config_source={"hashbeat_catchup": "all"})
    Settings.from_conf(app.conf, warn=False)
    assert warned(warnings) == []
    Settings.from_conf(app.conf)
    assert warned(warnings) == [
        "celery_hashbeat: setting hashbeat_catchup is not a celery_hashbeat setting and is "
        "ignored: did you mean hashbeat_catch_up?"
    ]


def test_known_settings_and_other_apps_settings_are_not_warned_about(
    warnings: pytest.LogCaptureFixture,
) -> None:
    conf = dict.fromkeys(KNOWN_SETTINGS) | {"broker_url": "memory://", "myapp_x": 1}
    Settings.from_conf(Celery("ok", set_as_current=False, config_source=conf).conf)
    django = django_app(CELERY_HASHBEAT_LEASE_TTL=6, CELERY_BROKER_URL="memory://", MYAPP_X=1)
    Settings.from_conf(django.conf)
    assert warned(warnings) == []


@pytest.mark.parametrize(
    ("key", "message"),
    [
        ("CELERY_HASHBEAT_LEASE_TTL", None),
        ("hashbeat_lease_ttl", None),  # Celery reads the plain name in a namespace too
        ("CELERY_HASHBEAT_LEASE_TLL", "did you mean CELERY_HASHBEAT_LEASE_TTL?"),
        ("CELERY_HASHBEAT_CATCHUP", "did you mean CELERY_HASHBEAT_CATCH_UP?"),
        ("HASHBEAT_KEY_PREFIX", "is ignored: this app reads it as CELERY_HASHBEAT_KEY_PREFIX"),
        ("CELERY_BROKER_URL", None),
    ],
)
def test_the_django_spelling_is_checked_and_suggested(key: str, message: str | None) -> None:
    problem = unread_setting(key, django_app(**{key: 1}).conf)
    if message is None:
        assert problem is None
    else:
        assert problem is not None and problem.startswith(f"setting {key} ") and message in problem


@pytest.mark.parametrize(
    ("key", "message"),
    [
        (
            "CELERY_HASHBEAT_LEASE_TTL",
            "is ignored: this app reads hashbeat_lease_ttl; the CELERY_HASHBEAT_* spelling is "
            "read only by an app configured with config_from_object(..., namespace='CELERY')",
        ),
        ("HASHBEAT_LEASE_TTL", "is ignored: this app reads it as hashbeat_lease_ttl"),
        ("hashbeat_store_option", "did you mean hashbeat_store_options?"),
        ("hashbeat_redis_ssl", "did you mean hashbeat_redis_use_ssl?"),
        ("hashbeat_zzz", "the settings are hashbeat_store_url, hashbeat_key_prefix, "),
    ],
)
def test_a_spelling_a_plain_app_does_not_read_is_named(key: str, message: str) -> None:
    conf = Celery("plain", set_as_current=False, config_source={key: 1}).conf
    problem = unread_setting(key, conf)
    assert problem is not None and problem.startswith(f"setting {key} ") and message in problem


def test_a_configuration_exit_off_the_main_thread_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    """A thread swallows SystemExit silently (``EmbeddedService(thread=True)``): the line must
    reach the log instead; on the main thread the interpreter prints it, so nothing is logged."""
    caplog.set_level(logging.CRITICAL, logger="celery_hashbeat.settings")
    problem = ImproperlyConfigured("hashbeat_catch_up must be one of 'latest', 'all', 'skip'")
    assert str(ConfigurationExit(problem)) == f"celery_hashbeat: {problem}"
    assert caplog.records == []
    thread = threading.Thread(target=ConfigurationExit, args=(problem,))
    thread.start()
    thread.join()
    assert [r.getMessage() for r in caplog.records] == [f"celery_hashbeat: {problem}"]


def test_the_console_token_is_a_non_empty_string_or_unset() -> None:
    assert settings_of().web_token is None
    assert settings_of(hashbeat_web_token="s3cret").web_token == "s3cret"
    with pytest.raises(ImproperlyConfigured, match="hashbeat_web_token must be a non-empty"):
        settings_of(hashbeat_web_token="  ")
