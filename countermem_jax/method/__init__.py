"""The method of the paper: the agents and CounterMem's three modules."""
