"""Development: the embedded default (SQLite, filesystem broker), debug on."""

from .base import *  # noqa: F403
from .base import env_bool

DEBUG = env_bool("DEBUG", True)
