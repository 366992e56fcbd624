"""The shipped measurements as append-only batches, and the sqlite database built from them.

`batches` writes and reads the immutable batch files under `data/batches/`; `build` makes the
read-only sqlite database the commands read as the shipped data (`data/shipped.db`) from them;
`append` adds a batch (`autotune merge NEW.db --into data/batches`); `migrate` turned the old
single-file `cache.db` into the first batch and checks that nothing was lost.
"""
