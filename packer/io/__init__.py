"""Input and output of traces: the native format, validation, fleet catalog, presets, importers, the generator, constraints files."""
