"""Eligibility and top-k retrieval of memory records (paper Appendix B.4). The embedding φ and the
fixed projection live below memory, retrieval and selector, in ``countermem_jax.method.text_embedding``."""
