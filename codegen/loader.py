"""Load pass: YAML declarations to the model, keeping a source position for every node.

Files are read with PyYAML's safe composer (no tags, no code), so every value carries
its line and column.  Each entry is consumed field by field; anything left over is an
error with a near-miss suggestion.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any, Callable

import yaml

from . import derivatives
from .classes import load_class
from .config import Config
from .diagnostics import Diagnostics, Loc, did_you_mean
from .dtypes import DTYPES, GROUPS
from . import pointwise as pointwise_expr
from .yaml_nodes import construct as _construct, loc_of, scalar_text_loc, text_loc
from .model import Declaration, Library
from .schema import BaseType, FunctionSchema, SchemaError
from .shapes import analyze, parse_shape

# The fields of an op declaration that the core model understands.  Plugins add their own.
CORE_FIELDS = {
    "func": "the schema, in PyTorch's schema language",
    "doc": "one paragraph of documentation",
    "dtypes": "the dtypes the kernels are instantiated for: a list, or a group name",
    "kernels": "dispatch key -> kernel function template, e.g. {CPU: myadd_cpu}",
    "header": "the kernel header in the kernels directory (default: <name>.h)",
    "shape": "input contracts and output shapes",
    "dtype": "return name -> dtype name or input name whose dtype it takes",
    "like": "returns take the shape and dtype of this input",
    "contiguous": "pass contiguous inputs to the kernel (default true)",
    "split_types": "one translation unit per dtype (cwrap's split_types)",
    "tags": "at::Tag names given to m.def, e.g. [pt2_compliant_tag]",
    "derivatives": "input name -> C++ gradient formula (torchgen's derivatives.yaml dialect)",
    "pointwise": "an elementwise expression that generates the CPU and CUDA kernels, or true for an "
                 "elementwise op with hand-written kernels",
}
# Fields that a pointwise expression decides for itself: shapes broadcast, dtypes promote.
_EXPRESSION_DECIDES = ("kernels", "header", "shape", "dtype", "like", "contiguous", "split_types")
KNOWN_TAGS = {"pt2_compliant_tag", "inplace", "inplace_view", "view_copy", "pointwise", "core", "nondeterministic_seeded",
              "nondeterministic_bitwise", "needs_fixed_stride_order", "flexible_layout", "maybe_aliasing_or_mutating",
              "data_dependent_output", "dynamic_output_shape", "generated", "cudagraph_unsafe", "reduction"}
# libyaml's composer when PyYAML has it (about 5x faster); same nodes, tags and marks.
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
_CPP_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_DISPATCH_KEYS = ("CPU", "CUDA")


class _Entry:
    """One YAML mapping, consumed field by field."""

    def __init__(self, node: yaml.MappingNode, path: str):
        self.path = path
        self.items: dict[str, tuple[yaml.Node, yaml.Node]] = {}
        for k, v in node.value:  # keys are names, each given once (checked for the whole file)
            self.items[k.value] = (k, v)

    def pop(self, name: str) -> yaml.Node | None:
        kv = self.items.pop(name, None)
        return kv[1] if kv else None


class DeclarationLoader:
    def __init__(self, config: Config, diag: Diagnostics, plugin_fields: dict[str, str] | None = None):
        self.config, self.diag = config, diag
        self.plugin_fields = dict(plugin_fields or {})
        self.classes: list = []

    # ------------------------------------------------------------------ files
    def load(self) -> Library:
        root = self.config.root
        decl_dir = self.config.path("declarations")
        files = sorted(decl_dir.rglob("*.yaml")) if decl_dir.is_dir() else []
        if not decl_dir.is_dir():
            self.diag.error(Loc(str(decl_dir), 1, 1), f"declarations directory '{self.config.declarations}' not found")
        decls: list = []
        for f in files:
            decls.extend(self.load_file(f, _rel(f, root)))
        self.check_duplicates(decls)
        return Library(self.config, tuple(decls), tuple(_rel(f, root) for f in files), tuple(self.classes))

    def load_file(self, file: Path, path: str) -> list[Declaration]:
        data = file.read_bytes()
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError as e:
            line = data[: e.start].count(b"\n") + 1
            col = e.start - (data.rfind(b"\n", 0, e.start) + 1) + 1
            self.diag.error(Loc(path, line, col), f"file is not valid UTF-8 (byte 0x{data[e.start]:02x})")
            return []
        self.text = text
        try:
            root = yaml.compose(text, Loader=_SAFE_LOADER)
        except yaml.MarkedYAMLError as e:
            m = e.problem_mark or e.context_mark
            self.diag.error(Loc(path, m.line + 1, m.column + 1) if m else Loc(path, 1, 1),
                            f"invalid YAML: {e.problem or e.context}")
            return []
        except yaml.YAMLError as e:
            self.diag.error(Loc(path, 1, 1), f"invalid YAML: {e}")
            return []
        bad_tag, bad_key, repeated = _structure_problems(root)
        if bad_tag is not None:
            tag = bad_tag.tag.replace("tag:yaml.org,2002:", "!!")
            self.diag.error(loc_of(bad_tag, path), f"YAML tag '{tag}' is not allowed in declarations")
            return []
        if bad_key is not None:
            self.diag.error(loc_of(bad_key, path), "a mapping key must be a name, not a list or mapping")
            return []
        for k in repeated:
            self.diag.error(loc_of(k, path), f"duplicate key '{k.value}'")
        if root is None:
            self.diag.error(Loc(path, 1, 1), "empty declaration file; expected a list of op declarations")
            return []
        if not isinstance(root, yaml.SequenceNode):
            self.diag.error(loc_of(root, path), "a declaration file must be a list of entries, each starting with '- func:'")
            return []
        out = []
        for node in root.value:
            if not isinstance(node, yaml.MappingNode):
                self.diag.error(loc_of(node, path), "each entry must be a mapping with a 'func:' field")
                continue
            if any(getattr(k, "value", None) == "class" for k, _ in node.value):
                c = load_class(node, path, self.diag)
                if c is not None:
                    self.classes.append(c)
                continue
            d = self.load_entry(node, path)
            if d is not None:
                out.append(d)
        return out

    # ------------------------------------------------------------------ one entry
    def load_entry(self, node: yaml.MappingNode, path: str) -> Declaration | None:
        e = _Entry(node, path)
        entry_loc = loc_of(node, path)
        locs: dict[str, Loc] = {k: loc_of(v, path) for k, (_, v) in e.items.items()}

        func = e.pop("func")
        if func is None:
            self.diag.error(entry_loc, "missing required field 'func'")
            return None
        schema = self.parse_schema(func, path)

        doc = self.string(e.pop("doc"), path, "doc") or ""
        dtypes = self.parse_dtypes(e.pop("dtypes"), path)
        kernels = self.parse_kernels(e.pop("kernels"), path)
        header = self.parse_header(e.pop("header"), path)
        like = self.string(e.pop("like"), path, "like") or ""
        contiguous = self.boolean(e.pop("contiguous"), path, "contiguous", True)
        split = self.boolean(e.pop("split_types"), path, "split_types", self.config.split_types)
        tags = self.parse_tags(e.pop("tags"), path)
        shape_node, dtype_node, deriv_node = e.pop("shape"), e.pop("dtype"), e.pop("derivatives")
        pointwise_node = e.pop("pointwise")
        extra = []
        for name in sorted(set(e.items) & set(self.plugin_fields)):
            extra.append((name, _construct(e.pop(name))))
        for name, (k, _) in sorted(e.items.items()):
            self.diag.error(loc_of(k, path), f"unknown field '{name}'",
                            did_you_mean(name, list(CORE_FIELDS) + list(self.plugin_fields)))
        if schema is None:
            return None

        func_loc = loc_of(func, path)
        self.check_schema(schema, func, path)
        shapes, plan = self.parse_shapes(schema, shape_node, path, like)
        out_dtypes = self.parse_output_dtypes(schema, dtype_node, path)
        derivs = None
        if deriv_node is not None:
            derivs = derivatives.parse(deriv_node, schema, path, self.diag, dict(out_dtypes))
        if like and (schema.argument(like) is None or like not in {a.name for a in _tensor_args(schema)}):
            self.diag.error(locs["like"], f"'like: {like}' must name a Tensor argument of {schema.name}")
        pointwise, expression = self.parse_pointwise(pointwise_node, schema, path)
        if expression is not None:
            for name in _EXPRESSION_DECIDES:
                if name in locs:
                    self.diag.error(locs[name], f"'{name}' does not apply to an op with a pointwise expression",
                                    "its kernels are generated, its inputs broadcast and their dtypes promote as "
                                    "aten's elementwise ops do")
            kernels = tuple((key, "") for key in _DISPATCH_KEYS)  # generated by the pointwise plugin
        return Declaration(
            schema=schema, path=path, loc=entry_loc, func_loc=func_loc, doc=doc.strip(), dtypes=dtypes,
            kernels=kernels, header=header or f"{schema.base_name.rstrip('_')}.h", shapes=shapes, shape_plan=plan,
            output_dtypes=out_dtypes, like=like, contiguous=contiguous, split_types=split, tags=tags,
            extra=tuple(extra), field_locs=tuple(sorted(locs.items())), derivatives=derivs,
            pointwise=pointwise, expression=expression,
        )

    # ------------------------------------------------------------------ fields
    def parse_schema(self, node: yaml.Node, path: str) -> FunctionSchema | None:
        if not isinstance(node, yaml.ScalarNode) or not node.value.strip():
            self.diag.error(loc_of(node, path), "'func' must be a schema string like 'myadd(Tensor self, Tensor other) -> Tensor'")
            return None
        try:
            return FunctionSchema.parse(node.value)
        except SchemaError as err:
            self.diag.error(scalar_text_loc(node, path, err.offset), f"invalid schema: {err.message}")
            return None

    def check_schema(self, schema: FunctionSchema, node: yaml.ScalarNode, path: str) -> None:
        loc = loc_of(node, path)
        if "::" in schema.name:
            self.diag.error(loc, f"'func' must not name a namespace ('{schema.name}'); the namespace is "
                            f"'{self.config.namespace}' from [tool.codegen]")
        names = [a.name for a in schema.arguments]
        for i, n in enumerate(names):
            if n in names[:i]:
                self.diag.error(scalar_text_loc(node, path, node.value.find(f" {n}", node.value.find(f" {n}") + 1) + 1),
                                f"duplicate argument name '{n}'")
        arrow = node.value.find("->")
        returns = [r.name for r in schema.returns if r.name]
        for i, n in enumerate(returns):
            if n in returns[:i] or n in names:
                at = node.value.find(f" {n}", arrow) if n in names else node.value.find(f" {n}", node.value.find(f" {n}", arrow) + 1)
                what = "duplicate return name" if n in returns[:i] else "return name is also an argument name:"
                self.diag.error(scalar_text_loc(node, path, at + 1), f"{what} '{n}'")
        if schema.is_vararg or schema.is_varret:
            self.diag.error(loc, "'...' varargs are not supported in op declarations")

    def string(self, node: yaml.Node | None, path: str, name: str) -> str | None:
        if node is None:
            return None
        if not isinstance(node, yaml.ScalarNode) or node.tag != "tag:yaml.org,2002:str":
            self.diag.error(loc_of(node, path), f"'{name}' must be a string")
            return None
        return node.value

    def boolean(self, node: yaml.Node | None, path: str, name: str, default: bool) -> bool:
        if node is None:
            return default
        if not isinstance(node, yaml.ScalarNode) or node.tag != "tag:yaml.org,2002:bool":
            self.diag.error(loc_of(node, path), f"'{name}' must be true or false")
            return default
        return _construct(node)

    def parse_pointwise(self, node: yaml.Node | None, schema: FunctionSchema, path: str):
        """`pointwise: true` (hand-written elementwise kernels) or an expression that generates them."""
        if node is None:
            return False, None
        if isinstance(node, yaml.ScalarNode) and node.tag == "tag:yaml.org,2002:bool":
            return _construct(node), None
        if not isinstance(node, yaml.ScalarNode) or node.tag != "tag:yaml.org,2002:str" or not node.value.strip():
            self.diag.error(loc_of(node, path), "'pointwise' must be an expression such as 'self + other', or true "
                            "for an elementwise op with hand-written kernels")
            return False, None
        rets = schema.returns
        if len(rets) != 1 or rets[0].type != BaseType("Tensor") or rets[0].alias is not None:
            self.diag.error(loc_of(node, path), "a pointwise expression computes one new Tensor: the schema must "
                            "return '-> Tensor'")
            return True, None
        if not _tensor_args(schema):
            self.diag.error(loc_of(node, path), "a pointwise expression needs a Tensor argument")
            return True, None
        expr = pointwise_expr.parse(node.value, schema, lambda line, col: text_loc(node, path, line, col, self.text), self.diag)
        return True, expr

    def parse_dtypes(self, node: yaml.Node | None, path: str):
        if node is None:
            return ()
        if isinstance(node, yaml.ScalarNode):
            if node.value in GROUPS:
                return tuple(DTYPES[n] for n in GROUPS[node.value])
            items = [node]
        elif isinstance(node, yaml.SequenceNode):
            items = node.value
        else:
            self.diag.error(loc_of(node, path), "'dtypes' must be a list of dtypes or a group name")
            return ()
        out = []
        for item in items:
            name = item.value if isinstance(item, yaml.ScalarNode) else None
            if name in DTYPES:
                if DTYPES[name] in out:
                    self.diag.error(loc_of(item, path), f"dtype '{name}' is listed twice")
                out.append(DTYPES[name])
            elif name in GROUPS:
                out.extend(DTYPES[n] for n in GROUPS[name] if DTYPES[n] not in out)
            else:
                hint = did_you_mean(str(name), list(DTYPES) + list(GROUPS)) or ""
                valid = "valid dtypes: " + ", ".join(DTYPES) + "; groups: " + ", ".join(GROUPS)
                self.diag.error(loc_of(item, path), f"unknown dtype '{name}'", (hint + " " if hint else "") + valid)
        if not out and isinstance(node, yaml.SequenceNode) and not node.value:
            self.diag.error(loc_of(node, path), "'dtypes' must not be empty")
        return tuple(out)

    def parse_kernels(self, node: yaml.Node | None, path: str):
        if node is None:
            return ()
        if not isinstance(node, yaml.MappingNode):
            self.diag.error(loc_of(node, path), "'kernels' must map dispatch keys to kernel names, e.g. {CPU: myadd_cpu}")
            return ()
        out = []
        for k, v in node.value:
            key = k.value
            if key not in _DISPATCH_KEYS:
                self.diag.error(loc_of(k, path), f"unknown dispatch key '{key}'",
                                did_you_mean(str(key), _DISPATCH_KEYS) or "valid keys: " + ", ".join(_DISPATCH_KEYS))
                continue
            if not isinstance(v, yaml.ScalarNode) or not _CPP_IDENT.match(v.value or ""):
                self.diag.error(loc_of(v, path), f"kernel name for {key} must be a C++ identifier")
                continue
            out.append((key, v.value))
        return tuple(out)

    def parse_header(self, node: yaml.Node | None, path: str) -> str:
        h = self.string(node, path, "header")
        if h is None:
            return ""
        p = Path(h)
        if p.is_absolute() or ".." in p.parts or not re.fullmatch(r"[A-Za-z0-9_./-]+\.(h|hpp|cuh)", h):
            self.diag.error(loc_of(node, path), f"'header' must be a relative path to a .h file inside the kernels directory, not '{h}'")
            return ""
        return h

    def parse_tags(self, node: yaml.Node | None, path: str) -> tuple[str, ...]:
        if node is None:
            return ()
        if not isinstance(node, yaml.SequenceNode):
            self.diag.error(loc_of(node, path), "'tags' must be a list of at::Tag names")
            return ()
        out = []
        for item in node.value:
            name = item.value if isinstance(item, yaml.ScalarNode) else None
            if name not in KNOWN_TAGS:
                self.diag.error(loc_of(item, path), f"unknown tag '{name}'", did_you_mean(str(name), KNOWN_TAGS))
            else:
                out.append(name)
        return tuple(out)

    def parse_shapes(self, schema: FunctionSchema, node: yaml.Node | None, path: str, like: str):
        rets = schema.return_names()
        if node is None:
            return (), analyze(schema, {}, rets, self.diag)
        if not isinstance(node, yaml.MappingNode):
            self.diag.error(loc_of(node, path), "'shape' must map argument and return names to shapes")
            return (), None
        arg_names = {a.name for a in _tensor_args(schema)}
        shapes = {}
        for k, v in node.value:
            target = k.value
            kloc = loc_of(k, path)
            is_output = target in rets
            if target not in arg_names and not is_output:
                self.diag.error(kloc, f"'{target}' is neither a Tensor argument nor a return of {schema.name}",
                                did_you_mean(str(target), list(arg_names) + list(rets)))
                continue
            if is_output and target in arg_names:
                self.diag.error(kloc, f"'{target}' names both an argument and a return")
                continue
            if isinstance(v, yaml.SequenceNode):
                value = [_construct(i) if isinstance(i, yaml.ScalarNode) else None for i in v.value]
                item_locs = [_item_loc(i, path) for i in v.value]
            elif isinstance(v, yaml.ScalarNode):
                value, item_locs = v.value, []
            else:
                self.diag.error(loc_of(v, path), "a shape must be a list of dimensions or one expression")
                continue
            s = parse_shape(schema, target, value, _item_loc(v, path), item_locs, is_output, self.diag)
            if s is not None:
                shapes[target] = s
        ordered = tuple(shapes[n] for n in [a.name for a in schema.arguments] + list(rets) if n in shapes)
        return ordered, analyze(schema, shapes, rets, self.diag)

    def parse_output_dtypes(self, schema: FunctionSchema, node: yaml.Node | None, path: str):
        if node is None:
            return ()
        rets = schema.return_names()
        if not isinstance(node, yaml.MappingNode):
            self.diag.error(loc_of(node, path), "'dtype' must map return names to a dtype or an input name")
            return ()
        out = []
        tensor_args = {a.name for a in _tensor_args(schema)}
        for k, v in node.value:
            if k.value not in rets:
                self.diag.error(loc_of(k, path), f"'{k.value}' is not a return of {schema.name}", did_you_mean(str(k.value), rets))
                continue
            val = v.value if isinstance(v, yaml.ScalarNode) else None
            if val not in DTYPES and val not in tensor_args:
                self.diag.error(loc_of(v, path), f"dtype of '{k.value}' must be a dtype name or a Tensor argument, not '{val}'",
                                did_you_mean(str(val), list(DTYPES) + sorted(tensor_args)))
                continue
            out.append((k.value, val))
        return tuple(out)

    # ------------------------------------------------------------------ across entries
    def check_duplicates(self, decls: list[Declaration]) -> None:
        seen: dict[str, Declaration] = {}
        idents: dict[str, Declaration] = {}
        folded: dict[str, Declaration] = {}
        for d in decls:
            first = seen.get(d.op_name)
            if first is not None:
                self.diag.error(d.func_loc, f"duplicate op '{d.op_name}'", f"first declared at {first.func_loc}")
                continue
            other = folded.get(d.ident.lower())
            if other is not None and other.ident != d.ident:
                self.diag.error(d.func_loc, f"op '{d.op_name}' and '{other.op_name}' differ only in case",
                                "their generated files would be one file on a case-insensitive file system (macOS, Windows)")
            folded.setdefault(d.ident.lower(), d)
            other = idents.get(d.ident)
            if other is not None:
                self.diag.error(d.func_loc, f"op '{d.op_name}' and '{other.op_name}' map to the same C++ name '{d.ident}'")
            seen[d.op_name] = d
            idents[d.ident] = d


_PLAIN_TAGS = {f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null", "seq", "map")}


def _nodes(node: yaml.Node | None):
    """Every node of a composed file, keys included, in document order."""
    stack = [node] if node is not None else []
    while stack:
        n = stack.pop()
        yield n
        if isinstance(n, yaml.SequenceNode):
            stack.extend(reversed(n.value))
        elif isinstance(n, yaml.MappingNode):
            for k, v in reversed(n.value):
                stack.extend((v, k))


def _structure_problems(root: yaml.Node | None):
    """(first explicit tag, first list or mapping used as a key, repeated keys) of a file, in
    one walk.  Declarations are plain data: any tag (`!!python/...`, `!foo`) is refused; keys
    are names everywhere, so every field parser may take them as strings; and each key is
    given once (YAML would silently keep the last)."""
    bad_tag = bad_key = None
    repeated = []
    for n in _nodes(root):
        if bad_tag is None and n.tag not in _PLAIN_TAGS:
            bad_tag = n
        if isinstance(n, yaml.MappingNode):
            seen = set()
            for k, _ in n.value:
                if not isinstance(k, yaml.ScalarNode):
                    bad_key = bad_key or k
                elif k.value in seen:
                    repeated.append(k)
                else:
                    seen.add(k.value)
    return bad_tag, bad_key, repeated


def _tensor_args(schema: FunctionSchema):
    from .schema import is_tensor, unwrap_optional
    return [a for a in schema.arguments if is_tensor(unwrap_optional(a.type))]


def _item_loc(node: yaml.Node, path: str) -> Loc:
    return loc_of(node, path).shifted(1 if getattr(node, "style", None) in ("'", '"') else 0)


def _rel(p: Path, root: Path) -> str:
    try:
        return p.relative_to(root).as_posix()
    except ValueError:
        return p.as_posix()
