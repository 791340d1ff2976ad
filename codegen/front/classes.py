"""Custom classes (TorchBind) in declarations: a `- class: Name` entry.

    - class: TensorQueue
      doc: A FIFO queue of tensors.
      header: tensor_queue.h             # the C++ class, hand-written, in the kernels directory
      init: (Tensor init_tensor)         # constructor arguments, in the schema language
      methods:                           # name: schema and the fake class's Python body
        push: {schema: "(Tensor x) -> ()", fake: "self.queue.append(x)"}
      flatten:                           # __obj_flatten__: state name -> C++ expression on `self`
        queue: self->get_raw_queue()
      pickle: serialize                  # __getstate__ = self->serialize(); __setstate__ = Name(state)

The fake class (for torch.compile and torch.export) holds the flattened state as
attributes of the same names and runs each method's `fake` body; every method needs one.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

import yaml

from ..lang import pysyntax
from ..core.diagnostics import Diagnostics, Loc, did_you_mean
from ..lang.schema import FunctionSchema, SchemaError
from ..core.yaml_nodes import loc_of

CLASS_FIELDS = ("class", "doc", "header", "init", "methods", "flatten", "pickle")
_IDENT = re.compile(r"[A-Za-z_]\w*\Z")


@dataclass(frozen=True)
class Method:
    name: str
    schema: FunctionSchema  # `name(<args>) -> <returns>`, self not included
    fake: str  # the Python body of the fake method
    loc: Loc


@dataclass(frozen=True)
class ClassDecl:
    name: str
    path: str
    loc: Loc
    doc: str
    header: str
    init: FunctionSchema  # `__init__(<args>) -> ()`
    init_loc: Loc  # where `init:` is written
    methods: tuple[Method, ...]
    flatten: tuple[tuple[str, str], ...]  # (state name, C++ expression)
    pickle: str  # the method whose result is the pickled state, or ""

    def qualified(self, namespace: str) -> str:
        return f"{namespace}::{self.name}"


def load_class(node: yaml.MappingNode, path: str, diag: Diagnostics) -> ClassDecl | None:
    fields = {}
    for k, v in node.value:
        if k.value not in CLASS_FIELDS:  # (duplicate keys are reported by the loader)
            diag.error(loc_of(k, path), f"unknown field '{k.value}' of a class", did_you_mean(str(k.value), CLASS_FIELDS))
        fields[k.value] = v
    loc = loc_of(node, path)
    name = _scalar(fields.get("class"))
    if not name or not _IDENT.match(name):
        diag.error(loc, "'class' must name the class with an identifier")
        return None
    header = _scalar(fields.get("header")) or ""
    if not header:
        diag.error(loc, f"class {name} needs 'header': the C++ class in the kernels directory")
    init = _schema(fields.get("init"), "__init__", "()", path, diag, loc, required=True)
    methods = []
    mnode = fields.get("methods")
    if mnode is not None and not isinstance(mnode, yaml.MappingNode):
        diag.error(loc_of(mnode, path), "'methods' must map method names to {schema: ..., fake: ...}")
        mnode = None
    for k, v in (mnode.value if mnode is not None else ()):
        mloc = loc_of(k, path)
        if not isinstance(v, yaml.MappingNode):
            diag.error(loc_of(v, path), f"method '{k.value}' must be {{schema: \"(...) -> ...\", fake: <python>}}")
            continue
        m = {kk.value: vv for kk, vv in v.value}
        for extra in set(m) - {"schema", "fake"}:
            diag.error(mloc, f"unknown field '{extra}' of method '{k.value}'", did_you_mean(extra, ("schema", "fake")))
        schema = _schema(m.get("schema"), k.value, None, path, diag, mloc, required=True)
        fake = _scalar(m.get("fake"))
        if not fake:
            diag.error(mloc, f"method '{k.value}' of {name} has no 'fake' body",
                       "the fake class needs one per C++ method, for torch.compile and torch.export")
        else:
            try:
                pysyntax.parse(fake)
            except SyntaxError as e:
                diag.error(loc_of(m["fake"], path), f"the fake body of '{k.value}' is not valid Python: {e.msg}")
        if schema is not None and fake:
            methods.append(Method(k.value, schema, fake, mloc))
    flatten = []
    fnode = fields.get("flatten")
    if fnode is None:
        diag.error(loc, f"class {name} needs 'flatten': the state __obj_flatten__ returns, name -> C++ expression")
    elif not isinstance(fnode, yaml.MappingNode):
        diag.error(loc_of(fnode, path), "'flatten' must map state names to C++ expressions on `self`")
    else:
        for k, v in fnode.value:
            if not _IDENT.match(str(k.value)):
                diag.error(loc_of(k, path), f"state name '{k.value}' is not an identifier")
            flatten.append((str(k.value), _scalar(v) or ""))
    pickle = _scalar(fields.get("pickle")) or ""
    if init is None or not header:
        return None
    return ClassDecl(name, path, loc, (_scalar(fields.get("doc")) or "").strip(), header, init,
                     loc_of(fields["init"], path), tuple(methods),
                     tuple(flatten), pickle)


def _scalar(node) -> str | None:
    return node.value if isinstance(node, yaml.ScalarNode) else None


def _schema(node, name, returns, path, diag, loc, required) -> FunctionSchema | None:
    text = _scalar(node)
    if text is None:
        if required:
            diag.error(loc if node is None else loc_of(node, path), f"'{name}' needs a schema like '(Tensor x) -> Tensor'")
        return None
    full = f"{name}{text}" + (f" -> {returns}" if returns and "->" not in text else "")
    try:
        return FunctionSchema.parse(full)
    except SchemaError as e:
        diag.error(loc_of(node, path), f"invalid schema '{text}': {e.message}")
        return None
