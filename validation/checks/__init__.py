"""Everything that judges evidence: the table of guarantees (`guarantees`), the pass over each key's history
(`kernel`, with `scans` and `aggregates`), its Spark run (`run`) over the kept sorted input (`sorted_input`), the
verdict per guarantee (`verdict`), the findings' vocabulary (`findings`), endpoint pinning (`pinning`), config drift
(`drift`), and the fault layer's rows read back (`applied_faults`). Imports neither the probe nor the wire."""
