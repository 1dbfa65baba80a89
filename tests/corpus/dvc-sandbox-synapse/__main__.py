# Written here after the shape of slava-dvc/dvc-sandbox infrastructure/__main__.py
from app import *  # noqa: F401,F403 - the packages declare their resources when imported
