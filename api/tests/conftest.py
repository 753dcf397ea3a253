import pytest
from rest_framework.test import APIClient

# The read tests run twice: straight to the views (the fast read path's middleware left out),
# and through the fast read path, each application's bundle rendered once a view has answered
# it (as the worker would after a publication) and Celery eager for the renders the fast path
# queues. Both must pass unchanged.
READ_PATH_MODULES = {"test_reads", "test_cache_keys", "test_exports", "test_history"}


def pytest_generate_tests(metafunc):
    if metafunc.module.__name__.rsplit(".", 1)[-1] in READ_PATH_MODULES:
        metafunc.parametrize("read_path", ["django", "fast"], indirect=True)


@pytest.fixture(autouse=True)
def read_path(request, monkeypatch):
    path = getattr(request, "param", None)
    if path is not None:
        from config.celery_app import app as celery_app

        from .fast_client import fast, plain

        original = APIClient.__init__

        def init(self, *args, **kwargs):
            original(self, *args, **kwargs)
            if path == "fast":
                fast(self, render=True)
            else:
                plain(self)

        monkeypatch.setattr(APIClient, "__init__", init)
        monkeypatch.setitem(celery_app.conf, "task_always_eager", True)
    return path or "django"
