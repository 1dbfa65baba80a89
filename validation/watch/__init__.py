"""`pubsubguard watch`: the guarantees verified all the time (a continuous canary).

The probe publishes at a steady, low rate and reads through the same isolated twins as verify; a Spark
Structured Streaming query judges the evidence as it is written, with the same guarantee kernel and finding
vocabulary as verify; the windows' verdicts become `findings.jsonl`, Prometheus metrics (`metrics`) and the
rolling report. The alerting rules shipped with it are `alerts.yml` beside this file.
"""

DEFAULT_WINDOW_S = 30.0  # a window: how often the streaming checks judge what was written
DEFAULT_RATE = 1.0  # messages per second per probed topic: a canary's cost (docs/performance.md)
DEFAULT_KEYS = 4  # ordering keys per topic
DEFAULT_KEEP_S = 3600.0  # evidence files kept this long
