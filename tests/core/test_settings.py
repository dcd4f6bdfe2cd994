from django.conf import settings


def test_it_uses_a_private_redis_database():
    assert settings.REDIS_URL.rsplit("/", 1)[1] != "0"


def test_it_runs_on_a_fresh_test_database(db):
    from django.db import connection

    assert "test" in str(connection.settings_dict["NAME"])
