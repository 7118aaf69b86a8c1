"""Generic machinery the method and the phases run on; it knows nothing of the method.

Imports nothing of countermem_jax outside runtime/.
"""
