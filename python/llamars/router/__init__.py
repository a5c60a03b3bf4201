"""Router mode: several models behind one server (llama-server's `--models-dir` and
`--models-preset`), one child server process per loaded model."""
