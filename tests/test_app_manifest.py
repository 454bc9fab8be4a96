"""app.json (a platform's description of the app) agrees with the Procfile and the settings."""

import json
from pathlib import Path

from omniroute.core.config import SETTINGS_BY_NAME

ROOT = Path(__file__).resolve().parent.parent


def manifest() -> dict:
    return json.loads((ROOT / "app.json").read_text())


def procfile() -> dict[str, str]:
    lines = (ROOT / "Procfile").read_text().splitlines()
    return dict(line.split(": ", 1) for line in lines if line.strip())


def test_every_config_var_is_a_setting_with_a_valid_value():
    for name, spec in manifest()["env"].items():
        setting = SETTINGS_BY_NAME[name]
        if "value" in spec:
            setting.parse(spec["value"])


def test_the_secrets_every_process_shares_are_generated_once_for_the_app():
    env = manifest()["env"]
    for name in ("OMNIROUTE_ADMIN_TOKEN", "OMNIROUTE_SECRET_KEY"):
        assert env[name]["generator"] == "secret", name


def test_the_formation_runs_the_procfiles_processes_and_release_migrates():
    processes = procfile()
    assert set(manifest()["formation"]) == {"web", "worker", "clock"} <= set(processes)
    assert processes["clock"] == "rq cron omniroute.jobs.cron --url $REDIS_URL"
    assert processes["release"] == "flask --app app db upgrade"


def test_the_add_ons_provide_the_shared_database_and_redis():
    plans = {addon["as"]: addon["plan"] for addon in manifest()["addons"]}
    assert plans == {"DATABASE": "heroku-postgresql", "REDIS": "heroku-redis"}
    assert {"DATABASE_URL", "REDIS_URL"} <= set(SETTINGS_BY_NAME)
