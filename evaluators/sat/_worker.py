"""Entry point of the isolated solver process: ``python -m evaluators.sat._worker``."""
from evaluators.sat import solving

if __name__ == "__main__":
    solving.worker_main()
