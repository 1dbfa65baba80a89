"""`pubsubguard watch`: the guarantees verified all the time (a continuous canary).

The probe publishes at a steady, low rate and reads through the same isolated twins as verify; a Spark
Structured Streaming query judges the evidence as it is written, with the same guarantee kernel and finding
vocabulary as verify; the windows' verdicts become `findings.jsonl`, Prometheus metrics (`metrics`) and the
rolling report. The alerting rules shipped with it are `alerts.yml` beside this file.
"""
