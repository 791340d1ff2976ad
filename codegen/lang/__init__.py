"""The languages written inside a declaration, each parsed to a small IR, analysed, and
rendered to C++ and Python: PyTorch's schema language (schema), shape rules (shapes),
pointwise and row-wise expressions (pointwise, rowwise), derivative formulas (derivatives)
and dtype rules (dtype_rules); pysyntax is Python's parser as they use it.  Imports only
`core`."""
