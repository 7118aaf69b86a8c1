"""Entry point of the isolated z3 process for encoding actions: ``python -m evaluators.smt._worker``."""
from evaluators import worker
from evaluators.smt import solving

if __name__ == "__main__":
    worker.worker_main(solving.run_z3_job)
