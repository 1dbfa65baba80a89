# Written here after the shape of slava-dvc/dvc-sandbox infrastructure/topics/__init__.py
from .analysis import RESULTS, results_topic
from .settings import COMMON, PROJECT, REGION, debug_reader

__all__ = ["RESULTS", "results_topic", "COMMON", "PROJECT", "REGION", "debug_reader"]
