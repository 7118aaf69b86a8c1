"""Construction tasks in flight when the config says 0: as many as the servers hold
(docs/concurrency.md, "Choosing W").
"""
AUTO = 0


def servers_hold(backbone) -> int:
    """The requests in flight ``backbone`` allows, looked up through wrappers (a response cache,
    a timing wrapper); 1 when none of them has a limit."""
    while backbone is not None:
        limit = getattr(backbone, "max_concurrency", None)
        if limit:
            return int(limit)
        backbone = getattr(backbone, "inner", None)
    return 1


def construction_wave(configured: int, backbone) -> int:
    """``construction.wave_size`` as the phase runs it: the configured value, or for ``AUTO``
    what the servers hold."""
    return int(configured) if int(configured) != AUTO else servers_hold(backbone)
