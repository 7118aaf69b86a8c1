"""Documentation checks for ``countermem_jax``.

Two properties are enforced:

* The package-wide density of explanatory lines is at least ``MIN_DENSITY``. Density is
  (comment lines + docstring lines) / code lines, measured over every ``.py`` file:
    - a docstring line is a line of a string-expression statement that is the first statement
      of a module, class or function body;
    - a comment line is a line holding a ``COMMENT`` token (a trailing comment makes its line
      count as both code and comment);
    - a code line is a line holding any other token, docstring lines excluded;
    - blank lines count as neither.
  The style guide (/work/shared/STYLE.md) aims at Dopamine / big_vision, which sit at 0.5–0.85.
* Every public function and class (no leading underscore, at module level or as a method of a
  public class) in ``DOCUMENTED_MODULES`` has a docstring.

Run ``python tests/test_docstring_density.py`` to print the current figures per module.
"""
import ast
import io
import pathlib
import sys
import tokenize

import pytest

PACKAGE = pathlib.Path(__file__).resolve().parent.parent / "countermem_jax"
MIN_DENSITY = 0.3

# Modules (relative to the package) whose public API must carry docstrings. Explicit on purpose:
# a module is added here once its public API is documented.
DOCUMENTED_MODULES = (
    "method/counterfactual.py",
    "method/locality.py",
    "protocol/construction_tally.py",
    "method/memory/record.py",
    "method/memory/persistence.py",
    "method/memory/scoring.py",
    "method/memory/retention.py",
    "method/memory/reuse.py",
    "method/memory/summary.py",
    "method/memory/store.py",
    "method/retrieval/conditions.py",
    "method/conditions/grammar.py",
    "method/conditions/derivation.py",
    "method/conditions/applicability.py",
    "domains/sql_names.py",
    "method/selector/network.py",
    "method/selector/checkpoint.py",
    "protocol/metrics.py",
    "protocol/intervals.py",
    "protocol/splits.py",
    "runtime/runlog.py",
    "protocol/summaries.py",
    "method/text_embedding.py",
    "method/condition_text.py",
    "phases/workdir_guard.py",
    "phases/config_fingerprint.py",
    "baselines/__init__.py",
    "baselines/common.py",
    "baselines/memory.py",
    "baselines/best_of_n.py",
    "baselines/expel.py",
    "baselines/generative_agents.py",
    "baselines/memgpt.py",
    "baselines/reasoningbank.py",
    "baselines/voyager.py",
    "reporting/load.py",
    "reporting/tables.py",
    "reporting/stats.py",
    "reporting/build.py",
    "reporting/figures.py",
    "backbones/base.py",
    "backbones/openai_http.py",
    "backbones/cache.py",
    "backbones/factory.py",
    "backbones/tokens.py",
    "backbones/gguf.py",
    "backbones/llama_cpp_backbone.py",
    "domains/__init__.py",
    "domains/base.py",
    "domains/registry.py",
    "domains/sql.py",
    "domains/sat.py",
    "domains/smt.py",
    "domains/coding.py",
    "domains/formal.py",
    "method/prompting/__init__.py",
    "method/prompting/prompts.py",
    "method/prompting/parsers.py",
    "method/prompting/failures.py",
    "testing/openai_server.py",
    "testing/scripted_backbone.py",
    "phases/workdir.py",
    "phases/context.py",
    "phases/build.py",
    "phases/construction_waves.py",
    "experiment.py",
    "report.py",
    "cli.py",
    "method/agents.py",
    "method/memory_use.py",
    "runtime/inflight.py",
    "runtime/row_blocks.py",
    "protocol/provenance.py",
    "study.py",
    "method/retrieval/retrieve.py",
    "method/retrieval/batching.py",
    "method/selector/__init__.py",
    "method/selector/dqn.py",
    "method/selector/features.py",
    "method/selector/policies.py",
    "method/selector/training.py",
    "method/selector/transition.py",
    "phases/train.py",
    "phases/evaluate.py",
    "../benchmarks/speed/pipeline.py",
    "reporting/studies.py",
    "reporting/study_figures.py",
    "studies/__init__.py",
    "studies/accumulation.py",
    "studies/breakdown.py",
    "studies/budget.py",
    "studies/cells.py",
    "studies/configs.py",
    "studies/estimates.py",
    "studies/protocols.py",
    "studies/rescued.py",
    "studies/runner.py",
    "studies/transfer.py",
    "sweep/__init__.py",
    "sweep/__main__.py",
    "sweep/execute.py",
    "sweep/graph.py",
    "sweep/progress.py",
    "sweep/ray_backend.py",
    "sweep/schedule.py",
    "sweep/spec.py",
)

_NOT_CODE = {tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
             tokenize.ENCODING, tokenize.ENDMARKER}


def _docstring_lines(tree):
    """Line numbers covered by module, class and function docstrings of a parsed file."""
    lines = set()
    for node in ast.walk(tree):
        if not isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)):
            continue
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant) \
                and isinstance(body[0].value.value, str):
            lines.update(range(body[0].lineno, body[0].end_lineno + 1))
    return lines


def count_lines(source):
    """Returns ``(code_lines, documentation_lines)`` of one Python source text (rules above)."""
    doc = _docstring_lines(ast.parse(source))
    comment, code = set(), set()
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            comment.add(tok.start[0])
        elif tok.type not in _NOT_CODE:
            # A multi-line token (a long string) makes every line it spans a code line.
            code.update(range(tok.start[0], tok.end[0] + 1))
    return len(code - doc), len(doc | comment)


def module_counts(package=PACKAGE):
    """Maps each module path (relative to the package) to ``(code_lines, documentation_lines)``."""
    return {str(path.relative_to(package)): count_lines(path.read_text(encoding="utf-8"))
            for path in sorted(package.rglob("*.py"))}


def density(counts):
    """Documentation lines per code line over a collection of ``(code, doc)`` pairs."""
    code = sum(c for c, _ in counts)
    doc = sum(d for _, d in counts)
    return doc / code if code else 0.0


def least_documented(counts_by_module, n=10):
    """The ``n`` modules with the lowest density, skipping modules with no code (``__init__``)."""
    rows = [(density([cd]), name, cd) for name, cd in counts_by_module.items() if cd[0]]
    return sorted(rows)[:n]


def undocumented_public(source):
    """Names of public functions/classes (and public methods of public classes) without docstring."""
    missing = []

    def visit(body, prefix):
        for node in body:
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) \
                    and not node.name.startswith("_"):
                if ast.get_docstring(node) is None:
                    missing.append(prefix + node.name)
                if isinstance(node, ast.ClassDef):
                    visit(node.body, prefix + node.name + ".")

    visit(ast.parse(source).body, "")
    return missing


def report(counts_by_module):
    """Text table: per-module code/doc lines and density, then the package total."""
    out = [f"{'module':45s} {'code':>5s} {'doc':>5s} {'density':>7s}"]
    for name, (code, doc) in sorted(counts_by_module.items()):
        if code:
            out.append(f"{name:45s} {code:5d} {doc:5d} {doc / code:7.2f}")
    total = list(counts_by_module.values())
    out.append(f"{'PACKAGE':45s} {sum(c for c, _ in total):5d} {sum(d for _, d in total):5d} "
               f"{density(total):7.2f}")
    return "\n".join(out)


def test_count_lines_follows_the_stated_rules():
    source = ('"""Module doc\nspanning two lines."""\n'
              "\n"
              "# a comment line\n"
              "X = 1  # trailing comment\n"
              "def f():\n"
              "    'one-line docstring'\n"
              "    return '''a\nb'''\n")
    code, doc = count_lines(source)
    # code: X = 1, def f(), return '''a / b''' (2 lines); doc: 2 module + 1 comment + 1 trailing + 1.
    assert (code, doc) == (4, 5)


def test_undocumented_public_finds_functions_classes_and_methods():
    source = ("def public(): pass\n"
              "def _private(): pass\n"
              "class Public:\n"
              "    'doc'\n"
              "    def method(self): pass\n"
              "    def _helper(self): pass\n")
    assert undocumented_public(source) == ["public", "Public.method"]


def test_package_documentation_density():
    counts = module_counts()
    total = density(counts.values())
    worst = "\n".join(f"  {d:.2f}  {name}  (code {c}, doc {k})"
                      for d, name, (c, k) in least_documented(counts))
    assert total >= MIN_DENSITY, (
        f"comment+docstring lines per code line is {total:.3f} < {MIN_DENSITY}; "
        f"least documented modules:\n{worst}")


@pytest.mark.parametrize("module", DOCUMENTED_MODULES)
def test_public_api_has_docstrings(module):
    path = PACKAGE / module
    assert path.exists(), f"{module} no longer exists (moved?): update DOCUMENTED_MODULES"
    missing = undocumented_public(path.read_text(encoding="utf-8"))
    assert not missing, f"{module}: public names without a docstring: {missing}"


def main():
    """Prints the per-module table and the ten least documented modules."""
    counts = module_counts()
    print(report(counts))
    print("\nleast documented:")
    for d, name, (code, doc) in least_documented(counts):
        print(f"  {d:.2f}  {name}  (code {code}, doc {doc})")
    return 0 if density(counts.values()) >= MIN_DENSITY else 1


if __name__ == "__main__":
    sys.exit(main())
