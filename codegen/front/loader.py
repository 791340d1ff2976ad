"""Load pass: YAML declarations to the model, keeping a source position for every node.

Files are read with PyYAML's safe composer (no tags, no code), so every value carries
its line and column.  Each entry is consumed field by field; anything left over is an
error with a near-miss suggestion.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Mapping, Sequence

import yaml

from ..lang import derivatives
from .classes import load_class
from ..core.config import Config
from ..core.diagnostics import Diagnostics, Loc, did_you_mean
from ..lang.dtype_rules import DTypeVar, RuleError, parse_rule, template_parameter
from ..core.dtypes import DTYPES, GROUPS, describe_group
from ..lang import pointwise as pointwise_expr
from ..lang import rowwise
from .fields import (INVALID, Any, Bool, Checker, CppExpr, Enum, Field, Identifier, Int, ListOf, MappingOf, OneOf,
                     Pattern, RelativePath, Schema, String, TorchTag, as_field, children, scalar_value)
from ..core.yaml_nodes import loc_of, scalar_text_loc, text_loc
from .model import Declaration, Library
from ..lang.schema import BaseType, FunctionSchema, is_list_of_tensors, is_tensor, unwrap_optional
from ..core.targets import DEVICES
from ..lang.shapes import analyze, parse_shape

_DISPATCH_KEYS = tuple(d.key for d in DEVICES)
_DTYPE = Enum(*DTYPES, *GROUPS, what="dtype")
# `kernels: {CPU: {abi: rust, function: fill_natural}}`: a kernel behind the C ABI (codegen/api/abi.py).
_IDENT_RE = r"[A-Za-z_][A-Za-z0-9_]*"
_FOREIGN = MappingOf(Enum("abi", "symbol", "function", what="foreign kernel key"), String(), fixed=(
    ("abi", Enum("c", "rust", what="kernel ABI")),
    ("symbol", Identifier(noun="a C symbol prefix", nouns="C symbol prefixes")),
    ("function", Pattern(rf"{_IDENT_RE}(::{_IDENT_RE})*", "a Rust function path such as 'kernels::huber'",
                         "Rust function paths")),
))
# An optional tensor's own dtype variable: its dtypes, and the one the kernel is instantiated
# for when it is not given.
_OPTIONAL_DTYPES = MappingOf(Enum("dtypes", "absent", what="optional tensor dtypes key"),
                             OneOf(_DTYPE, ListOf(_DTYPE, nonempty=True)), fixed=(("absent", _DTYPE),))
_DIMENSION = OneOf(Int(), String(nonempty=True), noun="a dimension (an integer, a name or an expression)",
                   nouns="dimensions (integers, names or expressions)")

def kernels_field(keys: Sequence[str]) -> Field:
    """The `kernels:` field over these dispatch keys (the devices of the run's kernel plugins)."""
    return Field(MappingOf(Enum(*keys, what="dispatch key"),
                           OneOf(Identifier(noun="a C++ function template name", nouns="C++ function template names"),
                                 _FOREIGN, noun="a C++ function template name or {abi: c|rust, ...}",
                                 nouns="C++ function template names or {abi: c|rust, ...} mappings")),
                 "dispatch key to kernel: a C++ function template, e.g. `{CPU: myadd_cpu, CUDA: myadd_cuda}`, or "
                 "a kernel behind the C ABI, `{abi: c, symbol: name}` (C, CUDA C or any language exporting "
                 "`name_<dtype>`) or `{abi: rust, function: path}` (a Rust function of a `[tool.codegen] crates` "
                 "crate); see *Kernels in Rust or C*.")


# The fields of an op declaration that the core model understands, typed as plugins type
# theirs (codegen/front/fields.py); one table with the plugins' fields, from which the docs'
# field table is generated (`python -m opwrap_codegen.reference fields`).  Each value is checked against its
# type first; the parsers below then read what the type cannot say.
CORE_FIELDS: dict[str, Field] = {
    "func": Field(Schema(), "the schema, in PyTorch's schema language (required). Types come from here only. No "
                  "namespace: it is `[tool.codegen] namespace`.", required=True),
    "doc": Field(String(), "documentation of the op."),
    "dtypes": Field(OneOf(_DTYPE, ListOf(_DTYPE, nonempty=True),
                          MappingOf(Identifier(noun="a Tensor argument or return name",
                                               nouns="Tensor argument and return names"),
                                    OneOf(_DTYPE, ListOf(_DTYPE, nonempty=True),
                                          Identifier(noun="a Tensor argument name"), _OPTIONAL_DTYPES,
                                          noun="dtypes, a Tensor argument name or {dtypes: ..., absent: ...}",
                                          nouns="dtypes, Tensor argument names or {dtypes: ..., absent: ...}"))),
                    "the dtypes the kernel is instantiated for: a list of `" + " ".join(DTYPES) + "`, or a group ("
                    + "; ".join(describe_group(g) for g in GROUPS) + "), shared by every tensor; or per tensor argument and "
                    "return, `{weight: floating, indices: [int32, int64], offsets: indices}` (below), an optional "
                    "tensor with the dtype it has when not given, `{dtypes: [float32, float64], absent: float32}`. "
                    "A tensor of any other dtype is a `RuntimeError` naming the op and argument."),
    "kernels": kernels_field(_DISPATCH_KEYS),
    "header": Field(RelativePath((".h", ".hpp", ".cuh"), "a relative path inside the kernels directory"),
                    "the CPU kernel header inside the kernels directory (default `<name>.h`, a trailing `_` "
                    "dropped)."),
    "shape": Field(MappingOf(Identifier(noun="an argument or return name", nouns="argument and return names"),
                             OneOf(ListOf(_DIMENSION), String(nonempty=True, noun="a shape expression",
                                                              nouns="shape expressions"))),
                   "the one shape rule (below): input contracts and output shapes."),
    "like": Field(Identifier(noun="a Tensor argument name"), "returns take the shape and dtype of this tensor input."),
    "dtype": Field(MappingOf(Identifier(noun="a return name", nouns="return names"),
                             String(nonempty=True, noun="a dtype rule", nouns="dtype rules")),
                   "return (or out= argument) name to its dtype rule: a dtype name, a Tensor argument, a `ScalarType` "
                   "argument, `<ScalarType? argument> or <Tensor argument>`, `<ScalarType? argument> or default`, "
                   "`<Tensor? argument> or <dtype | Tensor argument | default>` (its dtype where given), or "
                   "`promote(a, b, ...)` (default: the dtype of the first Tensor argument)."),
    "index": Field(MappingOf(Identifier(noun="an integer Tensor argument name",
                                        nouns="integer Tensor argument names"),
                             OneOf(_DIMENSION, ListOf(_DIMENSION), noun="a bound or [low, high]",
                                   nouns="bounds or [low, high] pairs")),
                   "integer tensor argument to the range its values must lie in: `high` (from 0) or `[low, high]` "
                   "(low included, high excluded), shape-rule expressions such as `weight.size(0)`; checked by the "
                   "CPU wrapper before the kernel runs, and used by `opwrap_codegen.testing` to make valid samples."),
    "contiguous": Field(Bool(), "pass contiguous inputs to the kernel (default `true`); a non-contiguous in-place "
                        "argument is computed in a contiguous copy and written back."),
    "split_types": Field(Bool(), "one translation unit per dtype, compiled in parallel (cwrap's split_types). "
                         "Default from `[tool.codegen] split_types`."),
    "tags": Field(ListOf(TorchTag(), unique=True),
                  "`at::Tag` names passed to `m.def`: any tag of the installed torch (`torch.Tag`). "
                  "`pt2_compliant_tag` is added to every op with a generated fake kernel, `inplace` and `out` by "
                  "torch's rules (see *Mutable arguments and out= overloads*)."),
    "pointwise": Field(OneOf(Bool(), String(nonempty=True, noun="an elementwise expression such as 'self + other'",
                                            nouns="elementwise expressions")),
                       "an elementwise expression that generates the op's CPU and CUDA kernels (below), or `true` for "
                       "an elementwise op with hand-written kernels of same-shaped inputs. Either way `torch.vmap` "
                       "works with no other rule (batch dims moved to the front, one call)."),
    "rowwise": Field(String(nonempty=True, noun="a row-wise program such as 'self / sum(self)'",
                            nouns="row-wise programs"),
                     "a program over each row that reduces it (`sum mean max min`) and may map it again: it "
                     "generates the op's vectorized CPU and CUDA kernels (below); the shape rule says which tensors "
                     "are rows, columns and per-row values."),
    "derivatives": Field(MappingOf(String(nonempty=True, noun="input or return names", nouns="input or return names"), CppExpr(), fixed=tuple(
                             (flag, ListOf(Bool()) if flag == "output_differentiability" else Bool())
                             for flag in derivatives.FLAGS)),
                         "gradient formulas per input and forward-derivative formulas per return (below); without "
                         "them, an op with Tensor inputs raises \"derivative for ns::op is not implemented\" when "
                         "backward reaches it."),
}
# Fields that a pointwise expression decides for itself: shapes broadcast, dtypes promote.
_EXPRESSION_DECIDES = ("kernels", "header", "shape", "dtype", "like", "contiguous", "split_types")
# ... and those that a row-wise program does (its shape rule is the declaration's).
_ROWWISE_DECIDES = ("kernels", "dtype", "contiguous", "split_types", "pointwise")
# libyaml's composer when PyYAML has it (faster: docs/speed.md); same nodes, tags and marks.
_SAFE_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)
# Collections nested deeper than this in a file's text are refused before the file is
# composed: libyaml's composer recurses (and crashes) on deep nesting, and its scanner takes
# time quadratic in the depth of flow collections ([[[...]]]).
MAX_FILE_DEPTH = 100
_OPEN_EVENTS = (yaml.SequenceStartEvent, yaml.MappingStartEvent)
_CLOSE_EVENTS = (yaml.SequenceEndEvent, yaml.MappingEndEvent)


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
    """Loads every declaration file.  `plugin_fields` are the plugins' typed fields; every
    field value, core or plugin, is checked against its type before anything reads it."""

    def __init__(self, config: Config, diag: Diagnostics, plugin_fields: Mapping[str, Field | str] | None = None,
                 device_keys: Sequence[str] = _DISPATCH_KEYS):
        self.config, self.diag = config, diag
        self.plugin_fields = {name: as_field(f) or Field(Any(), str(f)) for name, f in (plugin_fields or {}).items()}
        self.fields = {**CORE_FIELDS, **self.plugin_fields}
        if tuple(device_keys) != _DISPATCH_KEYS:  # a plugin's device besides the built-in ones
            self.fields["kernels"] = kernels_field(device_keys)
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
        decls = inherit_out_variants(decls, self.diag)
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
        deep, aliases = _scan(text)
        if deep is not None:
            self.diag.error(Loc(path, deep.line + 1, deep.column + 1),
                            f"collections are nested more than {MAX_FILE_DEPTH} levels deep")
            return []
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
        bad_tag, bad_key, repeated, cycle = _structure_problems(root, aliases)
        if cycle is not None:
            self.diag.error(loc_of(cycle, path), "this collection contains itself through a YAML alias")
            return []
        if bad_tag is not None:
            if bad_tag.tag == "tag:yaml.org,2002:merge":
                self.diag.error(loc_of(bad_tag, path), "YAML merge keys ('<<') are not supported in declarations",
                                "write the fields out; an alias (*name) may stand for one field's value")
                return []
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
        checker = Checker(self.diag, path, aliases)
        out = []
        for node in root.value:
            if not isinstance(node, yaml.MappingNode):
                self.diag.error(loc_of(node, path), "each entry must be a mapping with a 'func:' field")
                continue
            if any(getattr(k, "value", None) == "class" for k, _ in node.value):
                if not checker.bounded(node, "the class entry"):
                    continue
                c = load_class(node, path, self.diag)
                if c is not None:
                    self.classes.append(c)
                continue
            d = self.load_entry(node, path, checker)
            if d is not None:
                out.append(d)
        return out

    # ------------------------------------------------------------------ one entry
    def load_entry(self, node: yaml.MappingNode, path: str, checker: Checker | None = None) -> Declaration | None:
        """One op entry.  Every field is checked against its type and then parsed; a field
        that fails is left out (its default is used) and named in `invalid_fields`, so that
        the plugins' validation still runs on the rest and reports its own errors without
        repeating this one.  No Declaration when the schema is missing or wrong."""
        ck = checker or Checker(self.diag, path)
        e = _Entry(node, path)
        entry_loc = loc_of(node, path)
        locs: dict[str, Loc] = {k: loc_of(v, path) for k, (_, v) in e.items.items()}
        nodes: dict[str, yaml.Node] = {}
        values: dict = {}
        invalid: set[str] = set()
        for name, (k, v) in e.items.items():
            field = self.fields.get(name)
            if field is None:
                self.diag.error(loc_of(k, path), f"unknown field '{name}'", did_you_mean(name, list(self.fields)))
                continue
            value = ck.field(name, field, v, k)
            if value is INVALID:
                invalid.add(name)
            else:
                nodes[name], values[name] = v, value
        for name, field in self.fields.items():
            if field.required and name not in e.items:
                self.diag.error(entry_loc, f"missing required field '{name}'")
        schema = values.get("func")
        if schema is None:
            return None
        if not self.check_schema(schema, nodes["func"], path):
            return None

        def parsed(name: str, parse, default):
            """parse() for a field that passed its type check; on an error, the default."""
            if name not in nodes:
                return default
            before = len(self.diag.errors)
            result = parse(nodes[name])
            if len(self.diag.errors) > before:
                invalid.add(name)
                return default
            return result

        doc = values.get("doc", "")
        dtypes, dvars, owners = parsed("dtypes", lambda n: self.parse_dtype_field(schema, n, path), ((), (), ()))
        kernels, foreign = parsed("kernels", lambda n: self.parse_kernels(schema, n, values["kernels"], path),
                                  ((), ()))
        like = values.get("like", "")
        if like and (schema.argument(like) is None or like not in {a.name for a in _tensor_args(schema)}):
            listed = schema.argument(like) is not None and is_list_of_tensors(schema.argument(like))
            self.diag.error(locs["like"], f"'like: {like}' must name a Tensor argument of {schema.name}",
                            f"for results shaped like each element of the tensor list '{like}', give the elements a "
                            f"shape with a run and the results the same: shape: {{{like}: [\"*S\"], result: "
                            f"[\"*S\"]}}" if listed else "")
            invalid.add("like")
            like = ""
        rets = schema.return_names()
        # `index:` bounds are evaluated after the input checks: the shape analysis holds them
        # to an output's rules (every name they use is bound).
        bounds, uses = parsed("index", lambda n: self.parse_index(schema, n, path), ((), ()))
        shapes, plan = parsed("shape", lambda n: self.parse_shapes(schema, n, path, uses), None) \
            or ((), analyze(schema, {}, rets, self.diag if uses else Diagnostics(), uses))
        out_dtypes, rules = parsed("dtype", lambda n: self.parse_output_dtypes(schema, n, path), ((), ()))
        if dvars and "dtype" not in invalid:
            self.check_typed_returns(schema, dvars, owners, dict(rules), nodes["dtypes"], path)
        derivs = parsed("derivatives", lambda n: derivatives.parse(n, schema, path, self.diag, dict(out_dtypes)), None)
        pointwise, expression = False, None
        if "pointwise" in nodes:
            pointwise = values["pointwise"] is not False
            expression = parsed("pointwise", lambda n: self.parse_pointwise(n, schema, path), None)
        if expression is not None:
            for name in _EXPRESSION_DECIDES:
                if name in locs:
                    self.diag.error(locs[name], f"'{name}' does not apply to an op with a pointwise expression",
                                    "its kernels are generated, its inputs broadcast and their dtypes promote as "
                                    "aten's elementwise ops do")
        rows = None
        if "rowwise" in nodes:
            by_target = {sh.target: sh for sh in shapes}
            rows = parsed("rowwise", lambda n: rowwise.parse(
                n.value, schema, by_target, like, lambda line, col: text_loc(n, path, line, col, self.text),
                self.diag), None)
            for name in _ROWWISE_DECIDES:
                if name in locs:
                    self.diag.error(locs[name], f"'{name}' does not apply to an op with a row-wise program",
                                    "its kernels are generated from the program, over contiguous rows of the "
                                    "dispatched dtype")
        extra = tuple((name, values[name]) for name in sorted(values) if name in self.plugin_fields)
        return Declaration(
            schema=schema, path=path, loc=entry_loc, func_loc=loc_of(nodes["func"], path), doc=doc.strip(),
            dtypes=dtypes, kernels=kernels, foreign=foreign,
            header=values.get("header") or f"{schema.base_name.rstrip('_')}.h",
            shapes=shapes, shape_plan=plan, output_dtypes=out_dtypes, dtype_rules=rules, dtype_vars=dvars,
            dtype_owners=owners, index_bounds=bounds, like=like,
            contiguous=values.get("contiguous", True), split_types=values.get("split_types", self.config.split_types),
            tags=values.get("tags", ()), extra=extra, field_locs=tuple(sorted(locs.items())), derivatives=derivs,
            pointwise=pointwise, expression=expression, rows=rows, invalid_fields=tuple(sorted(invalid)),
        )

    # ------------------------------------------------------------------ fields
    def check_schema(self, schema: FunctionSchema, node: yaml.ScalarNode, path: str) -> bool:
        """What a declaration's schema may not do that the schema language allows.  Return
        names may repeat argument names, as torch allows (`-> (Tensor(a!) values, ...)` of
        out= overloads); two returns may not share a name (the named result type could not
        hold both)."""
        before = len(self.diag.errors)
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
            if n in returns[:i]:
                at = _word_at(node.value, n, arrow, returns[:i].count(n))
                self.diag.error(scalar_text_loc(node, path, at), f"duplicate return name '{n}'")
        if schema.is_vararg or schema.is_varret:
            self.diag.error(loc, "'...' varargs are not supported in op declarations")
        return len(self.diag.errors) == before

    def parse_pointwise(self, node: yaml.Node, schema: FunctionSchema, path: str):
        """`pointwise: <expression>` (already checked to be true, false or a string): the
        expression, or None for `true`/`false`."""
        if node.tag == "tag:yaml.org,2002:bool":
            return None
        rets = schema.returns
        if not rets or any(r.type != BaseType("Tensor") or r.alias is not None for r in rets):
            self.diag.error(loc_of(node, path), "a pointwise expression computes new Tensors: the schema must "
                            "return '-> Tensor' or '-> (Tensor a, Tensor b, ...)'")
            return None
        if not _tensor_args(schema):
            self.diag.error(loc_of(node, path), "a pointwise expression needs a Tensor argument")
            return None
        return pointwise_expr.parse(node.value, schema, lambda line, col: text_loc(node, path, line, col, self.text),
                                    self.diag)

    def parse_dtype_field(self, schema: FunctionSchema, node: yaml.Node, path: str):
        """`dtypes:`: (the primary dtypes, the variables, (name, variable) pairs); the last two
        empty for a list shared by every tensor."""
        if not isinstance(node, yaml.MappingNode):
            return self.parse_dtypes(node, path), (), ()
        tensors = [a for a in schema.arguments if is_tensor(unwrap_optional(a.type)) or is_list_of_tensors(a)]
        tensor_names = [a.name for a in tensors]
        rets = schema.return_names()
        typed_rets = [n for n, r in zip(rets, schema.returns)
                      if r.type == BaseType("Tensor") and schema.aliased_argument(r) is None]
        lists: dict[str, tuple] = {}  # name -> dtypes
        failed: set[str] = set()  # names whose value was reported
        absent: dict[str, object] = {}  # an optional tensor's variable: its dtype when not given
        refs: dict[str, tuple[str, yaml.Node]] = {}  # name -> (the name it shares with, node)
        required = [a.name for a in tensors if not a.is_optional and not is_list_of_tensors(a)]
        for k, v in node.value:
            name = k.value
            if name not in tensor_names and name not in typed_rets:
                hint = did_you_mean(str(name), tensor_names + typed_rets)
                what = "a return that aliases an argument (it has that argument's dtype)" if name in rets else \
                    f"neither a Tensor argument nor a new Tensor return of {schema.name}"
                self.diag.error(loc_of(k, path), f"'{name}' is {what}", hint)
                continue
            arg = schema.argument(name)
            if isinstance(v, yaml.ScalarNode) and v.value not in DTYPES and v.value not in GROUPS:
                if v.value not in tensor_names:  # neither dtypes nor a tensor: a misspelt dtype, most likely
                    self.diag.error(loc_of(v, path), f"unknown dtype '{v.value}': a value in 'dtypes' is a dtype, a "
                                    f"dtype group or a Tensor argument of {schema.name}",
                                    did_you_mean(str(v.value), list(DTYPES) + list(GROUPS) + tensor_names))
                    failed.add(name)
                    continue
                refs[name] = (v.value, v)
                continue
            if isinstance(v, yaml.MappingNode) or (arg is not None and arg.is_optional):
                parsed = self.parse_optional_dtypes(schema, arg, k, v, path, first=not required and name == next(iter(tensor_names), None))
                if parsed is None:
                    failed.add(name)
                    continue
                lists[name], absent[name] = parsed
                continue
            lists[name] = self.parse_dtypes(v, path)
        owners: dict[str, str] = {}
        primary_owner = next(iter(required), None) or next(iter(tensor_names), None) or next(iter(lists), None)
        if primary_owner is None:
            self.diag.error(loc_of(node, path), f"{schema.name} has no Tensor to give dtypes to")
            return (), (), ()
        if primary_owner in failed:
            return (), (), ()
        if primary_owner not in lists:
            self.diag.error(loc_of(node, path), f"'dtypes' must list the dtypes of '{primary_owner}' (the first "
                            "Tensor argument), which every tensor it does not name shares",
                            f"add '{primary_owner}: [...]'")
            return (), (), ()
        order = [a.name for a in schema.arguments] + list(rets)
        owned = sorted(lists, key=lambda n: (n != primary_owner, order.index(n)))
        variables = tuple(DTypeVar(template_parameter(n, n == primary_owner), n, lists[n], absent.get(n))
                          for n in owned)
        var_of = {v.owner: v.name for v in variables}
        for name, (target, v) in refs.items():
            if target in refs:
                self.diag.error(loc_of(v, path), f"'{target}' shares another argument's dtypes itself; name that one")
                continue
            if target in absent:
                self.diag.error(loc_of(v, path), f"'{target}' is optional: a tensor shares the dtypes of a required one",
                                f"give '{name}' dtypes of its own")
                continue
            var_of[name] = var_of.get(target, var_of[primary_owner])
        owners_t = tuple((n, var_of[n]) for n in order if n in var_of)
        return variables[0].dtypes, variables, owners_t

    def parse_optional_dtypes(self, schema, arg, key: yaml.Node, v: yaml.Node, path: str, first: bool):
        """An optional tensor's own variable, `{dtypes: [...], absent: <dtype>}`: (its dtypes,
        the dtype the kernel is instantiated for when it is not given); None when reported."""
        name = key.value
        if arg is None or not arg.is_optional or is_list_of_tensors(arg):
            self.diag.error(loc_of(v, path), f"'{name}' is not an optional Tensor argument: it has dtypes, not "
                            "{dtypes: ..., absent: ...}", f"write '{name}: [...]'")
            return None
        fields = {k.value: (k, x) for k, x in v.value} if isinstance(v, yaml.MappingNode) else {}
        if "dtypes" not in fields or "absent" not in fields:
            self.diag.error(loc_of(v if fields else key, path), f"'{name}' is optional: say which dtype the kernel is "
                            "instantiated for when it is not given",
                            f"'{name}: {{dtypes: [float32, float64], absent: float32}}', or share a required "
                            f"tensor's dtypes: '{name}: <argument>'")
            return None
        if first:
            self.diag.error(loc_of(key, path), f"'{name}' is the first tensor, which the op dispatches on: it cannot "
                            "be absent", "give a required tensor its dtypes")
            return None
        dtypes = self.parse_dtypes(fields["dtypes"][1], path)
        if fields["absent"][1].value in GROUPS:
            self.diag.error(loc_of(fields["absent"][1], path), f"'absent' is one dtype, not the group "
                            f"'{fields['absent'][1].value}'", "the dtype the kernel is instantiated for when "
                            f"'{name}' is not given")
            return None
        absent = DTYPES[fields["absent"][1].value]
        if absent not in dtypes:
            self.diag.error(loc_of(fields["absent"][1], path), f"'absent: {absent.name}' is not one of the dtypes of "
                            f"'{name}' ({', '.join(d.name for d in dtypes)})", "the kernel is instantiated for those")
            return None
        return dtypes, absent

    def check_typed_returns(self, schema, dvars, owners, rules, node, path):
        """A return with dtypes of its own takes its dtype from its rule at run time: it needs
        one that is not simply a tensor's dtype."""
        keys = {k.value: k for k, _ in node.value}
        for v in dvars:
            if v.owner in schema.return_names():
                rule = rules.get(v.owner)
                if rule is None or rule.kind == "tensor":
                    self.diag.error(loc_of(keys[v.owner], path),
                                    f"return '{v.owner}' has dtypes of its own, so 'dtype:' must say where its dtype "
                                    "comes from (a ScalarType argument, 'promote(a, b)', ...)"
                                    if rule is None else
                                    f"return '{v.owner}' has the dtype of '{rule.names[0]}'; leave it out of 'dtypes'")

    def parse_kernels(self, schema: FunctionSchema, node: yaml.MappingNode, value, path: str):
        """`kernels:` as (dispatch key, name) pairs, and the kernels behind the C ABI as
        (dispatch key, ForeignKernel): `{abi: c, symbol: s}` exports `s_<dtypes>`;
        `{abi: rust, function: f}` is `crate::f`, exported by the generated Rust bindings as
        `<namespace>_<op>_<key>_<dtypes>` (or `symbol`'s prefix)."""
        from .model import ForeignKernel
        ident = schema.ident
        nodes = {str(k.value): v for k, v in node.value}
        kernels, foreign = [], []
        for key, spec in value:
            if isinstance(spec, str):
                kernels.append((key, spec))
                continue
            fields, where = dict(spec), loc_of(nodes[key], path)
            abi = fields.get("abi")
            if abi is None:
                self.diag.error(where, f"the {key} kernel needs 'abi: c' or 'abi: rust'",
                                "a C++ kernel is named by its function template alone: `{" + key + ": " + ident + "_"
                                + key.lower() + "}`")
                continue
            if abi == "rust" and key != "CPU":
                self.diag.error(where, f"a Rust kernel runs on the CPU; the {key} kernel is 'abi: c' "
                                "(a .cu file in [tool.codegen] sources exporting the symbols)")
                continue
            if abi == "c" and "function" in fields:
                self.diag.error(where, "'function' names the Rust function of an 'abi: rust' kernel",
                                "an 'abi: c' kernel is named by 'symbol'")
                continue
            symbol = fields.get("symbol") or f"{self.config.namespace}_{ident}_{key.lower()}"
            function = fields.get("function") or (ident if abi == "rust" else "")
            foreign.append((key, ForeignKernel(abi, symbol, function, where)))
            kernels.append((key, symbol))
        return tuple(kernels), tuple(foreign)

    def parse_index(self, schema: FunctionSchema, node: yaml.MappingNode, path: str):
        from .model import IndexBound
        from ..lang.shapes import Num, parse_shape
        out, uses = [], []
        for k, v in node.value:
            name = k.value
            a = schema.argument(name)
            if a is None or not (is_tensor(unwrap_optional(a.type)) or is_list_of_tensors(a)):
                tensors = [t.name for t in schema.arguments if t in _tensor_args(schema) or is_list_of_tensors(t)]
                self.diag.error(loc_of(k, path), f"'{name}' is neither a Tensor argument nor a tensor list of "
                                f"{schema.name}", did_you_mean(str(name), tensors))
                continue
            items = v.value if isinstance(v, yaml.SequenceNode) else [v]
            if len(items) not in (1, 2):
                self.diag.error(loc_of(v, path), "an index range is 'high' or '[low, high]'")
                continue
            shape = parse_shape(schema, name, [_scalar(i) for i in items], loc_of(v, path),
                                [_item_loc(i, path) for i in items], False, self.diag)
            if shape is None:
                continue
            exprs = [d.expr for d in shape.dims]
            if any(d.star for d in shape.dims):
                self.diag.error(loc_of(v, path), "an index bound is a number or an expression, not a run")
                continue
            low, high = (Num(0), exprs[0]) if len(exprs) == 1 else (exprs[0], exprs[1])
            text = items[0].value if len(items) == 1 else f"[{items[0].value}, {items[1].value}]"
            out.append(IndexBound(name, low, high, str(text)))
            uses.extend((d.expr, d.loc) for d in shape.dims)
        return tuple(out), tuple(uses)

    def parse_dtypes(self, node: yaml.Node, path: str):
        """The dtypes (already checked to be dtype or group names): groups expanded, each dtype once."""
        items = [node] if isinstance(node, yaml.ScalarNode) else node.value
        out = []
        for item in items:
            name = item.value
            if name in DTYPES:
                if DTYPES[name] in out:
                    self.diag.error(loc_of(item, path), f"dtype '{name}' is listed twice")
                out.append(DTYPES[name])
            else:
                out.extend(DTYPES[n] for n in GROUPS[name] if DTYPES[n] not in out)
        return tuple(out)

    def parse_shapes(self, schema: FunctionSchema, node: yaml.MappingNode, path: str, uses=()):
        """`shape:`.  An out= argument's shape is an output's: the shape it is resized to."""
        rets = schema.return_names()
        arg_names = {a.name for a in _tensor_args(schema)} | {a.name for a in schema.arguments if is_list_of_tensors(a)}
        out_of = {}  # out= argument -> the return aliasing it
        for r, n in zip(schema.returns, rets):
            a = schema.aliased_argument(r)
            if a is not None and a.kwarg_only and a.is_write:
                out_of[a.name] = n
        shapes = {}
        for k, v in node.value:
            target = k.value
            kloc = loc_of(k, path)
            is_output = target in rets or target in out_of
            if target not in arg_names and not is_output:
                self.diag.error(kloc, f"'{target}' is neither a Tensor argument nor a return of {schema.name}",
                                did_you_mean(str(target), list(arg_names) + list(rets)))
                continue
            if is_output and target in arg_names and target not in out_of:
                self.diag.error(kloc, f"'{target}' names both an argument and a return")
                continue
            if isinstance(v, yaml.SequenceNode):
                value = [_scalar(i) for i in v.value]
                item_locs = [_item_loc(i, path) for i in v.value]
            else:
                value, item_locs = v.value, []
            s = parse_shape(schema, target, value, _item_loc(v, path), item_locs, is_output, self.diag)
            if s is not None:
                shapes[target] = s
        ordered = tuple(shapes[n] for n in [a.name for a in schema.arguments] + list(rets) if n in shapes)
        keyed = {out_of.get(n, n): shape for n, shape in shapes.items()}  # out= shapes as their returns'
        return ordered, analyze(schema, keyed, rets, self.diag, uses)

    def parse_output_dtypes(self, schema: FunctionSchema, node: yaml.MappingNode, path: str):
        """`dtype:`: ((return, rule text), (return, DTypeRule)).  An out= argument's rule is
        its return's."""
        rets = schema.return_names()
        by_out = {}
        for r, n in zip(schema.returns, rets):
            a = schema.aliased_argument(r)
            if a is not None and a.kwarg_only and a.is_write:
                by_out[a.name] = n
        texts, rules = [], []
        tensor_args = {a.name for a in _tensor_args(schema)}
        for k, v in node.value:
            name = by_out.get(k.value, k.value)
            if name not in rets:
                self.diag.error(loc_of(k, path), f"'{k.value}' is not a return of {schema.name}",
                                did_you_mean(str(k.value), rets))
                continue
            try:
                rule = parse_rule(v.value, schema, name)
            except RuleError as e:
                hint = e.hint or did_you_mean(str(v.value), list(DTYPES) + sorted(tensor_args))
                self.diag.error(_item_loc(v, path).shifted(e.column), str(e), hint)
                continue
            texts.append((name, rule.text))
            rules.append((name, rule))
        return tuple(texts), tuple(rules)

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


# Fields an out= overload takes from its functional op when it declares no kernel of its own.
_INHERITED = ("dtypes", "dtype_vars", "dtype_owners", "kernels", "foreign", "header", "like", "contiguous",
              "split_types", "pointwise", "expression", "rows", "index_bounds")


# plugin fields about the kernel (not autocast, vmap, ...)
_INHERITED_EXTRA = tuple(d.header_field for d in DEVICES if d.header_field != "header")


def inherit_out_variants(decls: list[Declaration], diag: Diagnostics) -> list[Declaration]:
    """An out= overload (`name.out(..., *, Tensor(a!) out) -> Tensor(a!)`) with neither
    `kernels` nor `pointwise` shares its functional op's kernel: the op `name` with the
    same arguments but the outs, declared in the library.  It takes that op's dtypes,
    kernels, input contracts and dtype rules; each out= argument takes the shape rule of the
    functional return at its position, and is resized to it.  The kernel is called exactly as
    the functional op calls it: the outs are the functional op's allocated outputs."""
    from dataclasses import replace

    functional = {d.name: d for d in decls if not d.overload}
    out = []
    for d in decls:
        f = functional.get(d.name)
        if not d.out_arguments or d.devices or d.pointwise or f is None or f is d:
            out.append(d)
            continue
        outs = d.out_arguments
        ins = [a for a in d.schema.arguments if a not in outs]
        same = [(a.name, str(a.type)) for a in ins] == [(a.name, str(a.type)) for a in f.schema.arguments]
        f_outs = [(o, r) for o, r in zip(f.outputs(), f.schema.returns)
                  if o.made_by == "wrapper" or f.expression is not None]
        if not same or len(f_outs) != len(outs) or len(f.outputs()) != len(outs):
            diag.error(d.func_loc, f"'{d.op_name}' declares no kernel, and it does not match its functional op "
                       f"'{f.op_name}' (the same arguments plus one out= argument per return, each allocated by "
                       "the wrapper)", f"declare 'kernels:' for it, or make the schemas agree: {f.schema}")
            out.append(d)
            continue
        renamed = {o.name: a.name for (o, _), a in zip(f_outs, outs)}
        rets = dict(zip(f.return_names, d.return_names))
        shapes = tuple(replace(s, target=renamed.get(s.target, s.target)) for s in f.shapes
                       if s.target not in renamed) + tuple(
            replace(s, target=renamed[s.target]) for s in f.shapes if s.target in renamed)
        plan = f.shape_plan
        values = {name: getattr(f, name) for name in _INHERITED}
        values["dtype_owners"] = tuple((rets.get(n, n), v) for n, v in f.dtype_owners)
        out.append(replace(d, **values, shapes=shapes, shape_plan=plan,
                           output_dtypes=tuple((rets[n], t) for n, t in f.output_dtypes),
                           dtype_rules=tuple((rets[n], r) for n, r in f.dtype_rules),
                           extra=tuple(sorted({**{k: v for k, v in f.extra if k in _INHERITED_EXTRA},
                                               **dict(d.extra)}.items()))))
    return out


_PLAIN_TAGS = {f"tag:yaml.org,2002:{t}" for t in ("str", "int", "float", "bool", "null", "seq", "map")}


def _scan(text: str):
    """(the mark of the first collection nested deeper than MAX_FILE_DEPTH or None, whether
    the text has aliases), from libyaml's event stream (its parser keeps a stack, where the
    composer recurses): each event is looked at once, and the parse stops at a collection too
    deep.  Text that is not YAML is left to the composer to report."""
    depth, aliases = 0, False
    try:
        for event in yaml.parse(text, Loader=_SAFE_LOADER):
            if isinstance(event, _OPEN_EVENTS):
                depth += 1
                if depth > MAX_FILE_DEPTH:
                    return event.start_mark, aliases
            elif isinstance(event, _CLOSE_EVENTS):
                depth -= 1
            elif isinstance(event, yaml.AliasEvent):
                aliases = True
    except yaml.YAMLError:
        pass
    return None, aliases


def _structure_problems(root: yaml.Node | None, aliases: bool = True):
    """(first explicit tag, first list or mapping used as a key, repeated keys, a collection
    that contains itself) of a file, in one walk that visits each node once, however many
    aliases name it.  Declarations are plain data: any tag (`!!python/...`, `!foo`, a merge
    key) is refused; keys are names everywhere, so every field parser may take them as
    strings; each key is given once (YAML would silently keep the last); and no alias names
    a collection it is inside (`&a [*a]`), so that every later walk ends.  Without `aliases`
    in the text, the file is a tree, walked without that bookkeeping."""
    bad_tag = bad_key = cycle = None
    repeated = []
    state: dict[int, bool] = {}  # node id -> finished (False: on the walk's current path)
    stack: list[tuple[yaml.Node, bool]] = [(root, False)] if root is not None else []
    while stack:
        n, leaving = stack.pop()
        if aliases:
            if leaving:
                state[id(n)] = True
                continue
            if id(n) in state:
                if not state[id(n)] and cycle is None:
                    cycle = n
                continue
            state[id(n)] = False
            stack.append((n, True))
        stack.extend((k, False) for k in reversed(children(n)))
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
    return bad_tag, bad_key, repeated, cycle


def _word_at(text: str, word: str, start: int, skip: int) -> int:
    """The offset of the (skip+1)-th whole-word occurrence of `word` in text[start:]."""
    found = [m.start() for m in re.finditer(rf"(?<!\w){re.escape(word)}(?!\w)", text[start:])]
    return start + found[min(skip, len(found) - 1)] if found else 0


def _scalar(node: yaml.Node):
    return scalar_value(node) if isinstance(node, yaml.ScalarNode) else None


def _tensor_args(schema: FunctionSchema):
    from ..lang.schema import is_tensor, unwrap_optional
    return [a for a in schema.arguments if is_tensor(unwrap_optional(a.type))]


def _item_loc(node: yaml.Node, path: str) -> Loc:
    return loc_of(node, path).shifted(1 if getattr(node, "style", None) in ("'", '"') else 0)


def _rel(p: Path, root: Path) -> str:
    try:
        return p.relative_to(root).as_posix()
    except ValueError:
        return p.as_posix()
