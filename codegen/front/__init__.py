"""The front end: YAML declarations to one checked, immutable model.  Typed declaration
fields (fields), custom classes (classes), the model (model), the loader that builds it
(loader) and the `--ops`/`--dtypes` selection over it (selection).  Imports `core` and
`lang`."""
