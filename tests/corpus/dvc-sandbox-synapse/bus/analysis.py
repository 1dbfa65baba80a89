# Written here after the shape of slava-dvc/dvc-sandbox infrastructure/topics/llm_analysis_result.py
import pulumi
import pulumi_gcp as gcp

from .settings import PROJECT, debug_reader

RESULTS = "llm-analysis-result"

results_topic = gcp.pubsub.Topic(RESULTS, name=RESULTS, project=PROJECT)
results_debug = debug_reader(RESULTS)  # by literal name, not by the topic's output

pulumi.export("llm_analysis_result_topic_name", RESULTS)
