"""Module III's memory-use selector: observations, the DQN, fixed baselines (Appendix C)."""
