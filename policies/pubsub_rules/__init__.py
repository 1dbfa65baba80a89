"""The Pub/Sub policy pack's rules. `facts` (limits, names, contracts) is pure Python and shared with
the estate model; `catalog` lists every rule; `pack` builds the SDK policies."""
