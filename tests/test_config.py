import os
from pathlib import Path

import pytest

from omniroute.core.config import SETTINGS, ConfigError, database_url, load_settings, markdown_table

CONFIGURATION = Path(__file__).resolve().parent.parent / "docs" / "configuration.md"


def test_defaults_are_the_documented_embedded_ones():
    values = load_settings({})
    assert values["HOST"] == "127.0.0.1"
    assert values["PORT"] == 20128
    assert values["DATA_DIR"] == "./data"
    assert values["REDIS_URL"] is None
    assert values["OMNIROUTE_ADMIN_TOKEN"] is None
    assert values["LOG_LEVEL"] == "INFO"
    assert values["MAX_BODY_BYTES"] == 1024 * 1024


def test_the_web_process_listens_beyond_loopback_only_where_a_platform_sets_port():
    assert load_settings({})["HOST"] == "127.0.0.1"
    assert load_settings({"PORT": "5000"})["HOST"] == "0.0.0.0"
    assert load_settings({"PORT": "5000", "HOST": "127.0.0.1"})["HOST"] == "127.0.0.1"


def test_database_url_defaults_to_a_sqlite_file_in_the_data_dir():
    url = database_url({"DATA_DIR": "./somewhere", "DATABASE_URL": None})
    assert url == f"sqlite:///{os.path.abspath('./somewhere')}/omniroute.db"
    assert database_url({"DATA_DIR": "x", "DATABASE_URL": "sqlite:////db.db"}) == "sqlite:////db.db"


def test_values_from_the_environment_are_parsed():
    values = load_settings({"PORT": "8080", "LOG_LEVEL": "debug", "REDIS_URL": "redis://h:1/2"})
    assert values["PORT"] == 8080
    assert values["LOG_LEVEL"] == "DEBUG"
    assert values["REDIS_URL"] == "redis://h:1/2"


def test_a_blank_value_means_the_default():
    assert load_settings({"PORT": "  ", "REDIS_URL": ""})["PORT"] == 20128


@pytest.mark.parametrize(
    ("name", "raw"),
    [("PORT", "http"), ("PORT", "70000"), ("MAX_BODY_BYTES", "-1"), ("LOG_LEVEL", "LOUD")],
)
def test_an_invalid_value_is_refused_naming_the_setting(name, raw):
    with pytest.raises(ConfigError, match=name):
        load_settings({name: raw})


def test_every_setting_has_help_text_and_a_unique_name():
    assert all(setting.help.strip() for setting in SETTINGS)
    assert len({setting.name for setting in SETTINGS}) == len(SETTINGS)


def test_the_readme_settings_table_matches_the_registry():
    assert markdown_table() in CONFIGURATION.read_text(encoding="utf-8"), (
        "docs/configuration.md's settings table is out of date: paste `make settings-table` into it"
    )
