"""Entry point of the isolated solver process: ``python -m evaluators.sat._worker``."""
from evaluators import worker
from evaluators.sat import solving

if __name__ == "__main__":
    worker.worker_main(solving._run)
