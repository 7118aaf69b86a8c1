"""Formal-verification world models: Lean 4, Dafny and Verus (binaries the user installs)."""
