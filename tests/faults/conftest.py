from tests.runtime.conftest import ray_local  # noqa: F401 - the session's one Ray instance
