"""Text-to-SQL world model: Spider and BIRD on SQLite."""
from evaluators.sql.checker import SQLEvaluator
from evaluators.sql.loaders import load_bird, load_spider, schema_columns

__all__ = ["SQLEvaluator", "load_bird", "load_spider", "schema_columns"]
