"""Generic machinery the method and the phases run on; it knows nothing of the method."""
