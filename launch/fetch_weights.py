"""Fetches a model's weights into the Hugging Face cache: what vLLM loads, not original/ or metal/.

    python launch/fetch_weights.py REPO [--revision REV] [--exclude PATTERN ...]

Run by launch/serve_vllm.sh with the vLLM environment's Python (huggingface_hub comes with vLLM).
It calls huggingface_hub.snapshot_download(ignore_patterns=...), the call `hf download` makes,
so it works with huggingface_hub 0.x and 1.x alike (its progress bars on stderr as usual), and
turns a failure into one line on stderr, "download of REPO failed: ...", that says which it was: the repository or revision does not exist (404), a login or permission
problem (401/403, gated), the hub out of reach, or the disk. Exit status 0 on success, 3 for
not found, 4 for access, 5 for network, 6 for disk, 1 otherwise."""
import argparse
import errno
import os
import sys

DEFAULT_EXCLUDE = ("original/*", "metal/*")


def _status(error) -> int | None:
    response = getattr(error, "response", None)
    return getattr(response, "status_code", None)


def explain(error, repo: str, revision: str, endpoint: str) -> tuple[int, str]:
    """(exit status, one line) for an exception of snapshot_download."""
    from huggingface_hub import errors
    token = "a token is set" if _has_token() else "no token is set"
    if isinstance(error, errors.RevisionNotFoundError):
        return 3, f"revision {revision!r} of {repo} not found on {endpoint} (404): check --revision"
    if isinstance(error, errors.GatedRepoError):
        return 4, (f"{repo} is gated on {endpoint} (HTTP {_status(error)}): accept its terms on "
                   f"its page, then `hf auth login` ({token})")
    if isinstance(error, errors.RepositoryNotFoundError):
        if _status(error) == 404:
            return 3, f"repository {repo} not found on {endpoint} (404): check --model"
        return 4, (f"{endpoint} answered {_status(error)} for {repo}: the name is wrong, or the "
                   f"repository is private/gated and needs a login (`hf auth login`; {token})")
    if isinstance(error, errors.HfHubHTTPError) and _status(error) in (401, 403):
        return 4, (f"{endpoint} refused the token for {repo} (HTTP {_status(error)}): "
                   "`hf auth login` again with a token that can read it")
    if isinstance(error, errors.LocalEntryNotFoundError):
        return 5, (f"cannot reach {endpoint} to fetch {repo} and the cache holds no complete copy "
                   "(network, proxy or HF_HUB_OFFLINE?)")
    if isinstance(error, OSError) and error.errno in (errno.ENOSPC, errno.EDQUOT):
        return 6, f"the disk filled while fetching {repo}: free space or point HF_HOME elsewhere"
    return 1, f"download of {repo} failed: {type(error).__name__}: {str(error).splitlines()[0]}"


def _has_token() -> bool:
    try:
        from huggingface_hub import get_token
        return bool(get_token())
    except Exception:   # a token file that cannot be read is no token
        return False


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("repo")
    parser.add_argument("--revision", default="main")
    parser.add_argument("--exclude", action="append", default=None,
                        help="a pattern to skip; repeat it (default: original/* and metal/*)")
    args = parser.parse_args(argv)
    try:
        from huggingface_hub import constants, snapshot_download
    except ImportError:
        print(f"download of {args.repo} failed: huggingface_hub is not installed in this "
              "environment (it comes with vllm)",
              file=sys.stderr)
        return 1
    endpoint = os.environ.get("HF_ENDPOINT", constants.ENDPOINT)
    try:
        path = snapshot_download(args.repo, revision=args.revision,
                                 ignore_patterns=list(args.exclude or DEFAULT_EXCLUDE))
    except Exception as error:   # every failure becomes one line, no traceback
        status, line = explain(error, args.repo, args.revision, endpoint)
        print(f"download of {args.repo} failed: {line}", file=sys.stderr)
        return status
    print(path)
    return 0


if __name__ == "__main__":
    sys.exit(main())
