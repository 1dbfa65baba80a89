"""The probe: the clients on the target (Spark tasks that publish and subscribe), the twins they read instead
of the declared subscriptions, the push receiver, the run's identity and access, the filter canary, the client-side
faults, and the drain (what the flushed evidence says, and when to stop waiting)."""
