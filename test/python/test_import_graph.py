"""The Python package's import graph has no cycle.

Every import inside python/switchyard — at module level or inside a function, relative
or absolute — is an edge from the importing module to the imported one; a cycle (a
module that, through others, imports itself) fails the test with its path. A deferred
import inside a function is still an edge: it hides a cycle from Python's import
machinery, not from the design. The test can fail: it also checks that a planted cycle
is found.
"""
import ast
import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
PACKAGE = os.path.join(HERE, "..", "..", "python", "switchyard")
sys.path.insert(0, os.path.join(HERE, "..", "support"))
from checks import Checks  # noqa: E402


def module_files(root):
    """{module name: path} of every .py file under the package `root`."""
    modules = {}
    for directory, _, files in os.walk(root):
        for name in files:
            if not name.endswith(".py"):
                continue
            path = os.path.join(directory, name)
            parts = os.path.relpath(path, os.path.dirname(root))[:-3].split(os.sep)
            if parts[-1] == "__init__":
                parts.pop()
            modules[".".join(parts)] = path
    return modules


def imported_modules(module, path, modules):
    """The package's modules that `module` (its file `path`) imports anywhere."""
    is_package = path.endswith("__init__.py")
    base = module.split(".") if is_package else module.split(".")[:-1]
    with open(path) as f:
        tree = ast.parse(f.read(), path)
    found = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                anchor = base[:len(base) - (node.level - 1)]
                origin = ".".join(anchor + ([node.module] if node.module else []))
            else:
                origin = node.module or ""
            # `from . import x` names a submodule when one exists; else a name in origin.
            names = [f"{origin}.{alias.name}" if f"{origin}.{alias.name}" in modules
                     else origin for alias in node.names]
        else:
            continue
        for name in names:
            if name in modules and name != module:
                found.add(name)
    return found


def find_cycle(graph):
    """One cycle of `graph` ({node: set of nodes}) as a list of nodes, or None."""
    state = {}   # node -> 1 on the stack, 2 done
    stack = []

    def visit(node):
        state[node] = 1
        stack.append(node)
        for successor in sorted(graph.get(node, ())):
            if state.get(successor) == 1:
                return stack[stack.index(successor):] + [successor]
            if successor not in state:
                cycle = visit(successor)
                if cycle:
                    return cycle
        stack.pop()
        state[node] = 2
        return None

    for node in sorted(graph):
        if node not in state:
            cycle = visit(node)
            if cycle:
                return cycle
    return None


def main():
    check = Checks()
    modules = module_files(os.path.normpath(PACKAGE))
    graph = {name: imported_modules(name, path, modules) for name, path in modules.items()}
    # The package's own __init__ loads its submodules lazily (module __getattr__): an
    # edge from a submodule to `switchyard` itself is Python's parent import, not a cycle.
    for name in graph:
        graph[name].discard("switchyard")
    check(f"the package's modules found ({len(modules)})",
          len(modules) > 20 and "switchyard.vllm.plugin" in modules)
    check("edges found (vllm.batch imports vllm.settings)",
          "switchyard.vllm.settings" in graph["switchyard.vllm.batch"])
    cycle = find_cycle(graph)
    check("no import cycle in python/switchyard", cycle is None,
          " -> ".join(cycle or []))
    planted = {name: set(edges) for name, edges in graph.items()}
    planted["switchyard.vllm.settings"].add("switchyard.vllm.batch")
    check("a planted cycle (settings -> batch) is found", find_cycle(planted) is not None)
    return check.summary()


if __name__ == "__main__":
    sys.exit(main())
