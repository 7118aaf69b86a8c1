"""The preflight binary (``python -m countermem_jax.preflight``) and its checks."""
