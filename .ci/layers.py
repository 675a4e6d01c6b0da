"""Checks that every module of src/ refers only to modules in its own layer or below: every
`crate::` path, and every `super::` path that climbs to the crate root, in non-test code.

The layers, lowest first, are those docs/ARCHITECTURE.md draws; `error` and `reference`
(the plain reference loops) may be used from every layer, test modules may use anything.
Exit status 1, with each offending line, when a module refers upward.
"""
import os
import re
import sys

ORDER = [
    "bounded_cache", "cpu", "files", "threads", "tensor", "cases", "einsum", "transpose", "model",
    "plan", "backend/cpu", "backend/cuda", "lib", "expression", "bench", "python", "bin",
]
ANY = {"error", "reference"}


def layer_of(rel):
    for i in reversed(range(len(ORDER))):
        name = ORDER[i]
        if rel in (name + ".rs", name + "/mod.rs") or rel.startswith(name + "/"):
            return i
    if rel == "lib.rs":
        return ORDER.index("lib")
    return None


def root_exports():
    """Names the crate root re-exports (`pub use module::{A, B}` in src/lib.rs), by module."""
    names = {}
    text = open("src/lib.rs", encoding="utf-8").read()
    for m in re.finditer(r"^pub use ([a-z_:]+)::\{?([A-Za-z_, ]+)\}?;", text, re.M):
        for name in m.group(2).split(","):
            names[name.strip()] = m.group(1).split("::")
    return names


ROOT = root_exports()


def layer_of_path(parts):
    """The layer of `crate::a::b...` given as ["a", "b", ...]."""
    if parts[0] in ROOT:
        parts = ROOT[parts[0]] + parts[1:]
    head = parts[0]
    if head in ANY:
        return None
    if head == "backend" and len(parts) > 1 and "backend/" + parts[1] in ORDER:
        return ORDER.index("backend/" + parts[1])
    if head in ORDER:
        return ORDER.index(head)
    return ORDER.index("lib")  # the crate root's own items and re-exports


def module_path(rel):
    """The module path of a file under src/: `plan/price.rs` -> ["plan", "price"]."""
    parts = rel[:-3].split("/")
    if parts[-1] in ("mod", "lib"):
        parts = parts[:-1]
    return parts


def super_references(text, module):
    """Every `super::...` path in `text` that climbs to the crate root, as a crate path."""
    for m in re.finditer(r"(?<![A-Za-z0-9_])((?:super::)+)([A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)*)", text):
        ups = m.group(1).count("super::")
        if ups >= len(module):
            yield m.group(2).split("::"), m.start()


def references(text):
    """Every `crate::...` path in `text`, `use crate::{a, b::c}` groups expanded one level."""
    for m in re.finditer(r"(?<![A-Za-z0-9_$])crate::(\{[^}]*\}|[A-Za-z_][A-Za-z0-9_]*(?:::[A-Za-z_][A-Za-z0-9_]*)*(?:::\{[^}]*\})?)", text):
        path = m.group(1)
        if path.startswith("{"):
            for item in path[1:-1].split(","):
                item = item.strip()
                if item and item != "self":
                    yield item.split("::"), m.start()
        else:
            yield path.split("::{")[0].split("::"), m.start()


def main():
    bad = []
    for root, _, files in os.walk("src"):
        for f in sorted(files):
            if not f.endswith(".rs"):
                continue
            path = os.path.join(root, f)
            layer = layer_of(os.path.relpath(path, "src"))
            if layer is None:
                continue
            lines = open(path, encoding="utf-8").read().split("\n")
            code = []
            for line in lines:
                if line.startswith("#[cfg(test)]") or line.startswith("mod tests"):
                    break
                code.append("" if line.strip().startswith("//") else line)
            text = "\n".join(code)
            module = module_path(os.path.relpath(path, "src"))
            found = list(references(text)) + list(super_references(text, module))
            for parts, at in found:
                target = layer_of_path(parts)
                if target is not None and target > layer:
                    line_no = text.count("\n", 0, at) + 1
                    bad.append(f"{path}:{line_no}: {ORDER[layer]} refers to crate::{'::'.join(parts)} ({ORDER[target]})")
    for b in bad:
        print(b)
    print(f"layers: {len(bad)} upward reference(s)")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
