"""Repository-test world model: localized edits checked by the project's tests in a sandbox."""
