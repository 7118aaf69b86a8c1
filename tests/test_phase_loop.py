"""The phases' event loop (countermem_jax/runtime/inflight.py): long-lived objects frozen out
of garbage collection while the loop runs, everything handed back after the last phase ends."""
import asyncio
import gc

from countermem_jax.runtime import inflight as phase_loop


def test_objects_alive_at_the_start_are_frozen_while_the_loop_runs_and_released_after():
    threshold = gc.get_threshold()

    async def inside():
        return gc.get_freeze_count(), gc.get_threshold()[0]
    frozen, young = phase_loop.run(inside())
    assert frozen > 0 and young == max(threshold[0], phase_loop.YOUNG_THRESHOLD)
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == threshold


def test_cycles_made_during_the_loop_are_still_collected():
    class Node:
        pass

    async def make_cycles():
        before = len(gc.get_objects())
        for _ in range(20000):  # garbage cycles, past the raised young threshold
            a, b = Node(), Node()
            a.other, b.other = b, a
        return len(gc.get_objects()) - before
    grown = phase_loop.run(make_cycles())
    assert grown < 20000  # the collector ran while the loop did: most cycles are gone


def test_a_phase_ending_beside_another_leaves_it_frozen():
    """Two phases overlap only in two threads: the one that ends first hands nothing back."""
    threshold = gc.get_threshold()

    async def inner():
        return gc.get_freeze_count()

    async def outer():
        frozen = await asyncio.to_thread(phase_loop.run, inner())
        return frozen, gc.get_freeze_count(), gc.get_threshold()
    inside, after_inner, young = phase_loop.run(outer())
    assert inside > 0 and after_inner == inside  # the inner phase did not unfreeze
    assert young[0] == max(threshold[0], phase_loop.YOUNG_THRESHOLD)
    assert gc.get_freeze_count() == 0 and gc.get_threshold() == threshold
    assert asyncio.run(inner()) == 0
