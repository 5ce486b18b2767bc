"""The Realtime protocol's event models, built once in livekit-agents' forkserver (`worker.PRELOAD_MODULES`).

The openai package defers building each pydantic model's validator until its first use (`defer_build`), so every
job process built the Realtime events it sends and reads again while its room waited: py-spy on job processes
under load found that building at about 2 % of their busy samples, and building all of them takes about 0.15 s of
CPU on an idle host. Importing this module builds them before the fork, and every job process inherits them.
"""

from __future__ import annotations

import importlib
import pkgutil

import openai.types.realtime as realtime_types
from pydantic import BaseModel


def build_realtime_models() -> int:
    """Build every model of `openai.types.realtime` not built yet; how many were built."""
    built = 0
    for info in pkgutil.iter_modules(realtime_types.__path__, f"{realtime_types.__name__}."):
        module = importlib.import_module(info.name)
        for value in vars(module).values():
            if (
                isinstance(value, type)
                and issubclass(value, BaseModel)
                and value.__module__ == module.__name__
                and not value.__pydantic_complete__
            ):
                value.model_rebuild()
                built += 1
    return built


BUILT = build_realtime_models()
