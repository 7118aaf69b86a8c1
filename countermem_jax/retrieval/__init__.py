"""Embedding, eligibility and top-k retrieval of memory records (paper Appendix B.4)."""
