"""The pipeline: load, validate, transform, emit (passes), then write (writer), with the
generated sources grouped into unity units (units).  Imports nothing itself, so that what
the build needs of it (units, writer, locking) imports no YAML, no Jinja2 and no plugin: a
wheel's build backend asks for its requirements before any is installed."""
