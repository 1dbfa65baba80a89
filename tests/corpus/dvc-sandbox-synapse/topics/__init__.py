from .llm_analysis_result import *
from .defaults import *