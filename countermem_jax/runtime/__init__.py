"""Generic machinery the method and the phases run on; it knows nothing of the method.

  inflight.py      a phase's tasks in flight: event loop, bounded pool, checker threads
  runlog.py        the append-only run log a phase resumes from
  row_blocks.py    blocks of rows for batched scoring
  file_hash.py     sha256 of a file
  paths.py         where the benchmark data lives ($COUNTERMEM_DATA or ../shared/benchdata)
  curves.py        the run's curves as TensorBoard event files
  jax_platform.py  keeps JAX off the GPUs vLLM holds, before JAX is imported

Imports nothing of countermem_jax outside runtime/.
"""
