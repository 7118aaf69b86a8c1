"""Generic machinery the method and the phases run on; it knows nothing of the method.

  task_pool.py     bounded pool of concurrent tasks
  checker_pool.py  the bounded threads the world-model checks run in
  phase_loop.py    the event loop a phase runs its tasks in
  runlog.py        the append-only run log a phase resumes from
  row_blocks.py    blocks of rows for batched scoring
  file_hash.py     sha256 of a file
  paths.py         where the benchmark data lives ($COUNTERMEM_DATA or ../shared/benchdata)
  curves.py        the run's curves as TensorBoard event files
  jax_platform.py  keeps JAX off the GPUs vLLM holds, before JAX is imported

Imports nothing of countermem_jax outside runtime/.
"""
