"""Executors: where a study's runs execute. `local` (default) or `ray` (the `ray` extra)."""

from depthwidth.study.executors.base import EXECUTORS, Executor, make_executor

__all__ = ["EXECUTORS", "Executor", "make_executor"]
