# Written here after the shape of tomerleib/ransomeware-dr pulumi-cloud-function/components/
"""Component resources of the scheduled function, and the reader of their config sections."""
