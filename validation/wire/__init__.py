"""The wire: the loopback gRPC proxy every probe channel crosses -- the recording listeners (`endpoints`), the
fault layer (`nemesis`, its planted anomalies in `planted`) that alters calls as a schedule says (`schedule`),
packet faults on its upstream link (`netem`), and that link itself (`upstream`)."""
